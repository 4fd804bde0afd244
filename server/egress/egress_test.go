package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		addr  string
		class string // "" = public, may be reached
	}{
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"2606:4700:4700::1111", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback (IPv4-mapped IPv6)"},
		{"64:ff9b::7f00:1", "loopback (via NAT64)"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "\"this network\" (RFC 791)"},
		{"::", "unspecified"},
		{"10.1.2.3", "private (RFC 1918)"},
		{"172.16.0.1", "private (RFC 1918)"},
		{"172.31.255.255", "private (RFC 1918)"},
		{"172.32.0.1", ""},
		{"192.168.1.1", "private (RFC 1918)"},
		{"::ffff:10.0.0.1", "private (RFC 1918) (IPv4-mapped IPv6)"},
		{"fd00::1", "unique local (RFC 4193)"},
		{"fc00::1", "unique local (RFC 4193)"},
		{"fd00:ec2::254", "unique local (RFC 4193)"},
		{"169.254.169.254", "link-local cloud metadata"},
		{"::ffff:169.254.169.254", "link-local cloud metadata (IPv4-mapped IPv6)"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"100.64.0.1", "carrier-grade NAT (RFC 6598)"},
		{"100.127.255.255", "carrier-grade NAT (RFC 6598)"},
		{"100.128.0.1", ""},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved (RFC 1112)"},
		{"192.0.2.10", "documentation (TEST-NET-1)"},
		{"198.51.100.7", "documentation (TEST-NET-2)"},
		{"203.0.113.9", "documentation (TEST-NET-3)"},
		{"2001:db8::1", "documentation (RFC 3849)"},
		{"3fff::1", "documentation (RFC 9637)"},
		{"198.18.0.1", "benchmarking (RFC 2544)"},
		{"198.19.255.255", "benchmarking (RFC 2544)"},
		{"192.0.0.8", "IETF protocol assignment (RFC 6890)"},
		{"192.88.99.1", "6to4 relay anycast (RFC 7526)"},
		{"2002:7f00:1::1", "6to4 (RFC 3056)"},
		{"2001:0:4136:e378::1", "Teredo (RFC 4380)"},
		{"::127.0.0.1", "IPv4-compatible IPv6 (deprecated)"},
		{"64:ff9b:1::1", "local-use NAT64 (RFC 8215)"},
		{"100::1", "discard-only (RFC 6666)"},
		{"fec0::1", "site-local (deprecated)"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			c, special := egress.Classify(netip.MustParseAddr(tt.addr))
			if tt.class == "" {
				if special {
					t.Fatalf("public address classified as %q", c.Name)
				}
				return
			}
			if !special || c.Name != tt.class {
				t.Fatalf("class = %q (special %v), want %q", c.Name, special, tt.class)
			}
		})
	}
}

func TestNewRejectsBadRanges(t *testing.T) {
	_, err := egress.New([]string{"10.0.0.0/8", "not-a-cidr", "10.0.0.0/33"})
	if err == nil || !strings.Contains(err.Error(), `"not-a-cidr"`) || !strings.Contains(err.Error(), `"10.0.0.0/33"`) {
		t.Fatalf("err = %v, want both bad entries named", err)
	}
	g, err := egress.New([]string{" 127.0.0.1 ", "::ffff:10.0.0.0/104", ""})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(g.Allowed(), ","); got != "127.0.0.1/32,10.0.0.0/8" {
		t.Fatalf("Allowed() = %s", got)
	}
}

func TestCheckAllowList(t *testing.T) {
	g, err := egress.New([]string{"127.0.0.0/8", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"127.0.0.1", "::ffff:127.0.0.5", "fd12::1", "8.8.8.8"} {
		if err := g.Check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("Check(%s) = %v, want allowed", a, err)
		}
	}
	for _, a := range []string{"::1", "10.0.0.1", "169.254.169.254", "fc00::1"} {
		err := g.Check(netip.MustParseAddr(a))
		if !errors.Is(err, errs.EgressDenied) {
			t.Errorf("Check(%s) = %v, want egress_denied", a, err)
		}
	}
	err = g.Check(netip.MustParseAddr("169.254.169.254"))
	if msg := err.Error(); !strings.Contains(msg, "169.254.169.254 is a link-local cloud metadata address") || !strings.Contains(msg, "SWITCHBOARD_EGRESS_ALLOW") {
		t.Fatalf("message %q does not name the class and the remedy", msg)
	}
}

// fakeResolver answers every name from a fixed table.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func hello(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") }

// listen starts an HTTP server on the given loopback address.
func listen(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	s := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func get(c *http.Client, url string) (string, error) {
	res, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

func TestDial(t *testing.T) {
	up := listen(t, "127.0.0.1", http.HandlerFunc(hello))
	port := up.Listener.Addr().(*net.TCPAddr).Port
	resolver := fakeResolver{
		"loopback.test": {netip.MustParseAddr("127.0.0.1")},
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"mixed.test":    {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("127.0.0.1")},
		"mapped.test":   {netip.MustParseAddr("::ffff:127.0.0.1")},
	}
	tests := []struct {
		name   string
		allow  []string
		host   string
		denied string // substring of the refusal, "" = must succeed
	}{
		{"loopback literal refused by default", nil, "127.0.0.1", "127.0.0.1 is a loopback address"},
		{"name resolving to loopback refused", nil, "loopback.test", "127.0.0.1 (resolved from loopback.test) is a loopback address"},
		{"IPv4-mapped loopback refused", nil, "mapped.test", "loopback (IPv4-mapped IPv6)"},
		{"metadata refused", nil, "metadata.test", "link-local cloud metadata"},
		{"metadata literal refused", []string{"127.0.0.0/8"}, "169.254.169.254", "link-local cloud metadata"},
		{"private literal refused", []string{"127.0.0.0/8"}, "10.1.2.3", "private (RFC 1918)"},
		{"loopback allowed", []string{"127.0.0.0/8"}, "127.0.0.1", ""},
		{"name resolving to loopback allowed", []string{"127.0.0.1/32"}, "loopback.test", ""},
		{"mapped allowed by IPv4 range", []string{"127.0.0.0/8"}, "mapped.test", ""},
		{"only the allowed one of several addresses is dialled", []string{"127.0.0.0/8"}, "mixed.test", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := egress.New(tt.allow, egress.WithResolver(resolver))
			if err != nil {
				t.Fatal(err)
			}
			body, err := get(g.Client(0), fmt.Sprintf("http://%s:%d/", tt.host, port))
			if tt.denied == "" {
				if err != nil || body != "hello" {
					t.Fatalf("got %q, %v; want hello", body, err)
				}
				return
			}
			if !errors.Is(err, errs.EgressDenied) {
				t.Fatalf("err = %v, want egress_denied", err)
			}
			if !strings.Contains(err.Error(), tt.denied) {
				t.Fatalf("err = %v, want it to say %q", err, tt.denied)
			}
		})
	}
}

// A resolver whose answer changes after the first lookup (DNS rebinding)
// cannot get a connection to the second answer: each dial checks what it
// resolved and connects to exactly that.
type rebinding struct{ n int }

func (r *rebinding) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	r.n++
	if r.n == 1 {
		return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

func TestDialRebinding(t *testing.T) {
	up := listen(t, "127.0.0.2", http.HandlerFunc(hello))
	port := up.Listener.Addr().(*net.TCPAddr).Port
	g, err := egress.New([]string{"127.0.0.2/32"}, egress.WithResolver(&rebinding{}))
	if err != nil {
		t.Fatal(err)
	}
	c := g.Client(0)
	url := fmt.Sprintf("http://rebind.test:%d/", port)
	if body, err := get(c, url); err != nil || body != "hello" {
		t.Fatalf("first: %q, %v", body, err)
	}
	g.Transport().CloseIdleConnections()
	if _, err := get(c, url); !errors.Is(err, errs.EgressDenied) {
		t.Fatalf("second (rebound to 127.0.0.1): err = %v, want egress_denied", err)
	}
}

func TestRedirects(t *testing.T) {
	target := listen(t, "127.0.0.1", http.HandlerFunc(hello))
	var up *httptest.Server
	up = listen(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-loopback":
			http.Redirect(w, r, target.URL+"/", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/to-ipv6-loopback":
			http.Redirect(w, r, "http://[::1]:1/", http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/to-ftp":
			http.Redirect(w, r, "ftp://example.com/x", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, up.URL+"/loop", http.StatusFound)
		case "/hello":
			hello(w, r)
		default:
			var n int
			_, _ = fmt.Sscanf(r.URL.Path, "/chain/%d", &n)
			if n > 0 {
				http.Redirect(w, r, fmt.Sprintf("%s/chain/%d", up.URL, n-1), http.StatusFound)
				return
			}
			hello(w, r)
		}
	}))
	g, err := egress.New([]string{"127.0.0.2/32"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		kind errs.Kind
		want string
	}{
		{"/to-loopback", errs.EgressDenied, "127.0.0.1 is a loopback address"},
		{"/to-metadata", errs.EgressDenied, "169.254.169.254 is a link-local cloud metadata address"},
		{"/to-ipv6-loopback", errs.EgressDenied, "::1 is a loopback address"},
		{"/to-file", errs.EgressDenied, `redirect to a "file" URL`},
		{"/to-ftp", errs.EgressDenied, `redirect to a "ftp" URL`},
		{"/loop", errs.Upstream, "redirected more than 5 times"},
		{"/chain/6", errs.Upstream, "redirected more than 5 times"},
		{"/chain/5", "", ""},
		{"/hello", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			body, err := get(g.Client(0), up.URL+tt.path)
			if tt.kind == "" {
				if err != nil || body != "hello" {
					t.Fatalf("got %q, %v", body, err)
				}
				return
			}
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %s saying %q", err, tt.kind, tt.want)
			}
		})
	}
}

func TestNoProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("http_proxy", "http://127.0.0.1:1")
	g, err := egress.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Transport().Proxy != nil {
		t.Fatal("guarded transport uses a proxy")
	}
}
