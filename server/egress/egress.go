// Package egress guards Switchboard's outgoing HTTP requests (connector
// calls, webhook deliveries) against server-side request forgery.
//
// A Guard refuses connections to loopback, private, link-local (including
// the cloud metadata address 169.254.169.254), CGNAT, multicast,
// unspecified, broadcast, documentation, benchmarking and other
// special-purpose addresses, IPv4 and IPv6 alike (including IPv4 addresses
// embedded in IPv6), unless the operator allows their range
// (config `egress.allow`, env SWITCHBOARD_EGRESS_ALLOW).
//
// The check runs at dial time on the resolved address, and the connection
// is made to exactly the address that was checked, so a DNS answer that
// changes between a check and a connect (DNS rebinding) cannot slip
// through; a second check on the socket address itself (net.Dialer
// Control) backs it up. Redirects are followed at most 5 times and only to
// http and https URLs; every hop dials through the same check.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// MaxRedirects is how many redirects a guarded client follows.
const MaxRedirects = 5

// Resolver looks host names up; *net.Resolver implements it. Tests pass
// their own to make a name resolve to any address.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// Guard decides which addresses outgoing requests may reach and dials
// only those.
type Guard struct {
	allow     []netip.Prefix
	resolver  Resolver
	dialer    *net.Dialer
	transport *http.Transport
}

// Option adjusts a Guard.
type Option func(*Guard)

// WithResolver makes the guard resolve host names with r instead of the
// system resolver.
func WithResolver(r Resolver) Option { return func(g *Guard) { g.resolver = r } }

// New returns a guard that lets through, besides public addresses, the
// CIDR ranges in allow (e.g. "10.20.0.0/16", "127.0.0.1/32"; a bare
// address means just that address).
func New(allow []string, opts ...Option) (*Guard, error) {
	g := &Guard{resolver: net.DefaultResolver}
	var bad []string
	for _, s := range allow {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := parsePrefix(s)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q", s))
			continue
		}
		g.allow = append(g.allow, p)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("egress.allow: %s not a CIDR range (e.g. 10.0.0.0/8 or fd00::/8)", strings.Join(bad, ", "))
	}
	for _, o := range opts {
		o(g)
	}
	g.dialer = &net.Dialer{
		Timeout:        10 * time.Second,
		KeepAlive:      30 * time.Second,
		ControlContext: g.control,
	}
	g.transport = &http.Transport{
		Proxy:                 nil, // a proxy would make the dial check meaningless
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return g, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// Allowed lists the ranges the operator allows, as CIDR strings.
func (g *Guard) Allowed() []string {
	out := make([]string, len(g.allow))
	for i, p := range g.allow {
		out[i] = p.String()
	}
	return out
}

// Check returns nil when addr may be reached, else an errs.EgressDenied
// error naming the address class and how to allow it.
func (g *Guard) Check(addr netip.Addr) error {
	return g.check(addr, "")
}

// CheckHost resolves host (a name or an IP literal) and returns the
// refusal of its first address when every address it resolves to is
// refused; nil when some address passes, or when the name does not resolve
// (a dial checks again). For save-time checks of configured URLs: the dial
// remains the guard.
func (g *Guard) CheckHost(ctx context.Context, host string) error {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return g.check(a, "")
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil
	}
	var first error
	for _, a := range addrs {
		err := g.check(a, host)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (g *Guard) check(addr netip.Addr, host string) error {
	addr = addr.WithZone("")
	c, ok := Classify(addr)
	if !ok || g.allowed(addr) || (c.Embedded.IsValid() && g.allowed(c.Embedded)) {
		return nil
	}
	what := addr.String()
	if host != "" && host != what {
		what = fmt.Sprintf("%s (resolved from %s)", addr, host)
	}
	d := map[string]any{"address": addr.String(), "class": c.Name, "range": c.Range.String()}
	if host != "" {
		d["host"] = host
	}
	return errs.E(errs.EgressDenied,
		"egress denied: %s is %s address (%s); outgoing requests to it are refused unless egress.allow (SWITCHBOARD_EGRESS_ALLOW) includes it",
		what, article(c.Name), c.Range).WithDetails(d)
}

func (g *Guard) allowed(a netip.Addr) bool {
	for _, p := range g.allow {
		if p.Contains(a) || (a.Is4In6() && p.Contains(a.Unmap())) {
			return true
		}
	}
	return false
}

func article(s string) string {
	if s != "" && strings.ContainsRune("aeiouAEIOU", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// DialContext resolves the host of address, refuses it unless some
// resolved address passes Check, and connects to a checked address (never
// resolving again). It has the signature of http.Transport.DialContext.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("egress: invalid port %q", portStr)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = g.resolver.LookupNetIP(ctx, lookupNetwork(network), host)
		if err != nil {
			return nil, err
		}
	}
	var denied, dialErr error
	tried := false
	for _, a := range addrs {
		if !familyMatches(network, a) {
			continue
		}
		if err := g.check(a, host); err != nil {
			if denied == nil {
				denied = err
			}
			continue
		}
		tried = true
		conn, err := g.dialer.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		dialErr = err
		if ctx.Err() != nil {
			break
		}
	}
	switch {
	case tried:
		return nil, dialErr
	case denied != nil:
		return nil, denied
	}
	return nil, &net.DNSError{Err: "no usable address", Name: host, IsNotFound: true}
}

// control checks the socket's destination once more, right before connect.
func (g *Guard) control(_ context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return errs.E(errs.EgressDenied, "egress denied: unparseable destination address")
	}
	return g.Check(ap.Addr())
}

func lookupNetwork(network string) string {
	switch network {
	case "tcp4", "udp4":
		return "ip4"
	case "tcp6", "udp6":
		return "ip6"
	}
	return "ip"
}

func familyMatches(network string, a netip.Addr) bool {
	switch network {
	case "tcp4", "udp4":
		return a.Unmap().Is4()
	case "tcp6", "udp6":
		return a.Is6() && !a.Is4In6()
	}
	return true
}

// Transport returns the guard's HTTP transport: every connection it makes
// goes through DialContext, and it never uses a proxy. It is shared by all
// users of the guard (one connection pool); do not modify it — Clone it
// for a variant, which keeps the guarded dialer.
func (g *Guard) Transport() *http.Transport { return g.transport }

// Client returns an HTTP client over Transport with the given overall
// timeout (0: none) that follows at most MaxRedirects redirects, only to
// http and https URLs, each dialled through the guard.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: g.transport, Timeout: timeout, CheckRedirect: CheckRedirect}
}

// ErrTooManyRedirects is wrapped by the error CheckRedirect returns after
// MaxRedirects redirects.
var ErrTooManyRedirects = errors.New("too many redirects")

// CheckRedirect is the redirect policy of guarded clients (usable as
// http.Client.CheckRedirect): at most MaxRedirects redirects, only to
// http and https. The destination's address is checked when it is dialled.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return errs.Wrap(errs.Upstream, ErrTooManyRedirects, fmt.Sprintf("upstream redirected more than %d times", MaxRedirects))
	}
	if s := req.URL.Scheme; s != "http" && s != "https" {
		return errs.E(errs.EgressDenied, "egress denied: redirect to a %q URL; only http and https are followed", s).
			WithDetails(map[string]any{"scheme": s})
	}
	return nil
}
