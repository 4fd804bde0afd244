package connectors_test

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
	"sync/atomic"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// names resolves host names from a table, like a DNS server would.
type names map[string]string

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func newInvoker(t *testing.T, allow []string, opts ...egress.Option) (*connectors.Service, *connectors.Invoker, *store.Bolt) {
	t.Helper()
	svc, _, st := newService(t)
	guard, err := egress.New(allow, opts...)
	if err != nil {
		t.Fatal(err)
	}
	conns := &connectors.Connections{Store: st, Vault: svc.Vault}
	log := &connectors.InvocationLog{Store: st}
	return svc, &connectors.Invoker{Store: st, Connections: conns, Guard: guard, Log: log}, st
}

func hello(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"path":%q,"auth":%q}`, r.URL.Path, r.Header.Get("Authorization"))
}

// TestInvokerRefusesNameResolvingToLoopback: a public-looking host name
// that resolves to loopback is refused at dial time.
func TestInvokerRefusesNameResolvingToLoopback(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(hello))
	defer up.Close()
	port := up.Listener.Addr().(*net.TCPAddr).Port
	resolver := names{"api.partner.example": "127.0.0.1", "meta.partner.example": "169.254.169.254", "lan.partner.example": "192.168.1.20"}
	for _, tt := range []struct {
		host, allow, want string
	}{
		{"api.partner.example", "", "127.0.0.1 (resolved from api.partner.example) is a loopback address"},
		{"meta.partner.example", "127.0.0.0/8", "169.254.169.254 (resolved from meta.partner.example) is a link-local cloud metadata address"},
		{"lan.partner.example", "127.0.0.0/8", "private (RFC 1918)"},
		{"api.partner.example", "127.0.0.1/32", ""},
	} {
		t.Run(tt.host+"|"+tt.allow, func(t *testing.T) {
			var allow []string
			if tt.allow != "" {
				allow = []string{tt.allow}
			}
			svc, inv, _ := newInvoker(t, allow, egress.WithResolver(resolver))
			if _, err := svc.CreateConnector(ctx, connectors.Connector{Name: "partner", BaseURL: fmt.Sprintf("http://%s:%d", tt.host, port), Auth: connectors.Auth{Type: connectors.AuthNone}}); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.CreateAction(ctx, "partner", connectors.Action{Name: "get", Method: "GET", Path: "/x"}); err != nil {
				t.Fatal(err)
			}
			res, err := inv.Run(ctx, connectors.RunInput{Connector: "partner", Action: "get"})
			if tt.want == "" {
				if err != nil || res.Status != 200 || !strings.Contains(string(res.Result), `"/x"`) {
					t.Fatalf("allowed: %s, %v", res.Result, err)
				}
				return
			}
			if !errors.Is(err, errs.EgressDenied) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want egress_denied saying %q", err, tt.want)
			}
		})
	}
}

// fakeTokens is an OAuth token source that counts refreshes.
type fakeTokens struct {
	token     atomic.Value
	refreshes atomic.Int32
}

func (f *fakeTokens) Token(context.Context, string, string) (string, error) {
	return f.token.Load().(string), nil
}

func (f *fakeTokens) Refresh(_ context.Context, _, _, stale string) (string, error) {
	f.refreshes.Add(1)
	next := stale + "-refreshed"
	f.token.Store(next)
	return next, nil
}

// TestInvokerOAuthRefreshesOnceOn401: an upstream 401 makes the invoker
// ask for a new token once and retry once.
func TestInvokerOAuthRefreshesOnceOn401(t *testing.T) {
	var calls atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path == "/always-401" || r.Header.Get("Authorization") != "Bearer old-refreshed" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, "bad token "+r.Header.Get("Authorization"))
			return
		}
		hello(w, r)
	}))
	defer up.Close()
	svc, inv, _ := newInvoker(t, []string{"127.0.0.0/8"})
	tokens := &fakeTokens{}
	tokens.token.Store("old")
	inv.OAuth = tokens
	c := oauthConnector("crm")
	c.BaseURL = up.URL
	if _, err := svc.CreateConnector(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"me", "always-401"} {
		if _, err := svc.CreateAction(ctx, "crm", connectors.Action{Name: strings.ReplaceAll(a, "-", "_"), Method: "GET", Path: "/" + a}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := inv.Run(ctx, connectors.RunInput{Connector: "crm", Action: "me"})
	if err != nil || res.Status != 200 {
		t.Fatalf("run: %v", err)
	}
	if calls.Load() != 2 || tokens.refreshes.Load() != 1 {
		t.Fatalf("%d upstream calls and %d refreshes, want 2 and 1", calls.Load(), tokens.refreshes.Load())
	}
	if strings.Contains(string(res.Result), "old-refreshed") {
		t.Fatalf("the token came back in the result: %s", res.Result)
	}

	calls.Store(0)
	_, err = inv.Run(ctx, connectors.RunInput{Connector: "crm", Action: "always_401"})
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Upstream || e.Details["status"] != 401 {
		t.Fatalf("err = %v, want upstream_error with status 401", err)
	}
	if calls.Load() != 2 || tokens.refreshes.Load() != 2 {
		t.Fatalf("%d calls and %d refreshes in all, want one refresh and one retry per call", calls.Load(), tokens.refreshes.Load())
	}
	if body := e.Details["body"].(string); strings.Contains(body, "old-refreshed") || !strings.Contains(body, connectors.Redacted) {
		t.Fatalf("the refused token is not redacted from the error body: %q", body)
	}
}

func TestRedactor(t *testing.T) {
	r := connectors.NewRedactor("s3cr/t+\"x", "", "pw")
	tests := []struct{ in, want string }{
		{`{"a":"s3cr/t+\"x","b":1}`, `{"a":"[REDACTED]","b":1}`},
		{`{"s3cr/t+\"x":true}`, `{"[REDACTED]":true}`},
		{`["q=s3cr%2Ft%2B%22x&z", "pwd pw"]`, `["q=[REDACTED]\u0026z","[REDACTED]d [REDACTED]"]`},
		{`{"n":12345678901234567890,"safe":"nothing"}`, `{"n":12345678901234567890,"safe":"nothing"}`},
	}
	for _, tt := range tests {
		got := string(r.JSON([]byte(tt.in)))
		if got != tt.want && strings.ReplaceAll(got, "&", `\u0026`) != tt.want {
			t.Errorf("JSON(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if got := r.Text("key=s3cr/t+\"x;"); got != "key=[REDACTED];" {
		t.Errorf("Text = %q", got)
	}
}

func TestInvocationLogBounds(t *testing.T) {
	svc, _, st := newService(t)
	for _, n := range []string{"a", "b"} {
		if _, err := svc.CreateConnector(ctx, connectors.Connector{Name: n, BaseURL: "https://x.example", Auth: connectors.Auth{Type: connectors.AuthNone}}); err != nil {
			t.Fatal(err)
		}
	}
	log := &connectors.InvocationLog{Store: st, Size: 3, MaxPending: 10}
	for i := range 25 {
		log.Record(connectors.Invocation{Connector: "a", Action: fmt.Sprint(i)})
	}
	log.Record(connectors.Invocation{Connector: "b", Action: "only"})
	log.Record(connectors.Invocation{Connector: "gone", Action: "x"})
	list, next, err := log.List(ctx, "a", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || next != "" || list[0].Action != "24" || list[2].Action != "22" {
		t.Fatalf("log of a: %+v", list)
	}
	if list, _, _ := log.List(ctx, "b", "", 100); len(list) != 1 {
		t.Fatalf("log of b: %+v", list)
	}
	count := func(prefix string) int {
		n := 0
		_ = st.View(ctx, func(tx store.Tx) error {
			return tx.Scan(connectors.BucketInvocations, prefix, "", func(string, []byte) (bool, error) { n++; return true, nil })
		})
		return n
	}
	if n := count("gone/"); n != 0 {
		t.Fatalf("%d entries of an unknown connector stored", n)
	}
	svc.OnDeleteConnector = append(svc.OnDeleteConnector, log.DeleteConnectorTx)
	if err := svc.DeleteConnector(ctx, "b", 0); err != nil {
		t.Fatal(err)
	}
	if n := count("b/"); n != 0 {
		t.Fatalf("%d entries left after deleting the connector", n)
	}
}
