package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// The secrets of these tests: none may ever appear in a response, a log
// line or an error.
const (
	secretKey      = "sk_live_TOPSECRET_4f9a"
	secretToken    = "tok_TOPSECRET_77"
	secretPassword = "pw_TOPSECRET_!x"
)

var allSecrets = []string{secretKey, secretToken, secretPassword, "TOPSECRET"}

// recordingDoer keeps every response body the client saw.
type recordingDoer struct {
	next client.HttpRequestDoer
	buf  *syncBuffer
}

func (d recordingDoer) Do(req *http.Request) (*http.Response, error) {
	res, err := d.next.Do(req)
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	_, _ = d.buf.Write(b)
	for k, vs := range res.Header {
		_, _ = fmt.Fprintf(d.buf, "%s: %s\n", k, strings.Join(vs, ","))
	}
	res.Body = io.NopCloser(bytes.NewReader(b))
	return res, nil
}

// ienv is a running server with its log and every response it sent.
type ienv struct {
	*servertest.Env
	t         *testing.T
	logs      *syncBuffer
	responses *syncBuffer
	// sb runs actions with an invoke-only key; admin manages connections.
	sb    *client.Switchboard
	admin *client.ClientWithResponses
}

func newIEnv(t *testing.T, opts ...servertest.Option) *ienv {
	t.Helper()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts = append([]servertest.Option{func(c *config.Config) { c.Egress.Allow = []string{"127.0.0.0/8"} }}, opts...)
	env := servertest.NewWithLogger(t, logger, opts...)
	e := &ienv{Env: env, t: t, logs: logs, responses: &syncBuffer{}}
	_, invokeKey, err := env.Server.Keys().Create(context.Background(), auth.NewAPIKeyInput{Name: "app", Scopes: []string{auth.ScopeInvoke}})
	if err != nil {
		t.Fatal(err)
	}
	e.sb, err = client.New(env.URL, invokeKey, client.WithHTTPClient(recordingDoer{next: env.HTTPClient(t), buf: e.responses}))
	if err != nil {
		t.Fatal(err)
	}
	e.admin, err = client.NewClientWithResponses(env.URL, client.WithHTTPClient(recordingDoer{next: env.HTTPClient(t, servertest.WithKey(env.AdminKey)), buf: e.responses}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.assertNoSecrets)
	return e
}

// assertNoSecrets fails the test if a secret reached a response or the log.
func (e *ienv) assertNoSecrets() {
	for _, s := range allSecrets {
		if strings.Contains(e.responses.String(), s) {
			e.t.Errorf("a response contains the secret %q", s)
		}
		if strings.Contains(e.logs.String(), s) {
			e.t.Errorf("the log contains the secret %q", s)
		}
	}
}

func (e *ienv) connector(c connectors.Connector, actions ...connectors.Action) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.Server.Connectors().CreateConnector(ctx, c); err != nil {
		e.t.Fatal(err)
	}
	for _, a := range actions {
		if _, err := e.Server.Connectors().CreateAction(ctx, c.Name, a); err != nil {
			e.t.Fatalf("action %s: %v", a.Name, err)
		}
	}
}

func (e *ienv) connection(connector string, in client.ConnectionInput) {
	e.t.Helper()
	res, err := e.admin.CreateConnectionWithResponse(context.Background(), connector, in)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.StatusCode() != http.StatusCreated {
		e.t.Fatalf("create connection: %d %s", res.StatusCode(), res.Body)
	}
}

func (e *ienv) run(connector, action string, params any) (*client.ActionResult, *client.APIError) {
	e.t.Helper()
	res, err := e.sb.Integrations(connector).Run(context.Background(), action, params)
	if err != nil {
		var ae *client.APIError
		if !errors.As(err, &ae) {
			e.t.Fatalf("run %s.%s: %v", connector, action, err)
		}
		return nil, ae
	}
	return res, nil
}

func (e *ienv) mustRun(connector, action string, params any) *client.ActionResult {
	e.t.Helper()
	res, ae := e.run(connector, action, params)
	if ae != nil {
		e.t.Fatalf("run %s.%s: %v (details %v)", connector, action, ae, ae.Details)
	}
	return res
}

func wantAPIError(t *testing.T, ae *client.APIError, status int, code string, msg ...string) {
	t.Helper()
	if ae == nil {
		t.Fatalf("succeeded, want %d %s", status, code)
	}
	if ae.StatusCode != status || ae.Code != code {
		t.Fatalf("got %d %s (%s), want %d %s", ae.StatusCode, ae.Code, ae.Message, status, code)
	}
	for _, m := range msg {
		if !strings.Contains(ae.Message, m) {
			t.Fatalf("message %q does not contain %q", ae.Message, m)
		}
	}
}

// seen is a request an upstream received.
type seen struct {
	Method     string
	RequestURI string
	Header     http.Header
	Body       string
}

// upstream is a real HTTP server that records what it receives.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newUpstream(t *testing.T, h http.HandlerFunc) *upstream {
	return newUpstreamOn(t, "127.0.0.1", h)
}

func newUpstreamOn(t *testing.T, ip string, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	u.Server = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{Method: r.Method, RequestURI: r.RequestURI, Header: r.Header.Clone(), Body: string(b)})
		u.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		h(w, r)
	})}}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.reqs...)
}

func (u *upstream) last(t *testing.T) seen {
	t.Helper()
	r := u.requests()
	if len(r) == 0 {
		t.Fatal("the upstream received no request")
	}
	return r[len(r)-1]
}

// echo answers JSON describing the request, credentials included (as a
// careless API would).
func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"method": r.Method, "uri": r.RequestURI, "auth": r.Header.Get("Authorization"),
		"key": r.Header.Get("X-Api-Key"), "cookie": r.Header.Get("Cookie"), "body": string(b),
	})
}

func getAction(name, path string, params map[string]connectors.Parameter) connectors.Action {
	return connectors.Action{Name: name, Method: "GET", Path: path, Parameters: params}
}

// TestRunCredentialPlacements runs an action with each kind of credential
// and checks what the upstream received, and that the echoed secret never
// comes back.
func TestRunCredentialPlacements(t *testing.T) {
	e := newIEnv(t)
	up := newUpstream(t, echo)
	basicWant := "Basic " + base64.StdEncoding.EncodeToString([]byte("ada:"+secretPassword))
	tests := []struct {
		name  string
		auth  connectors.Auth
		conn  client.ConnectionInput
		check func(t *testing.T, s seen)
	}{
		{"apikey_header", connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-API-Key", In: connectors.InHeader}, client.ConnectionInput{ApiKey: &[]string{secretKey}[0]},
			func(t *testing.T, s seen) {
				if got := s.Header.Get("X-API-Key"); got != secretKey {
					t.Fatalf("X-API-Key = %q", got)
				}
			}},
		{"apikey_header_prefix", connectors.Auth{Type: connectors.AuthAPIKey, Name: "Authorization", In: connectors.InHeader, Prefix: "Token "}, client.ConnectionInput{ApiKey: &[]string{secretKey}[0]},
			func(t *testing.T, s seen) {
				if got := s.Header.Get("Authorization"); got != "Token "+secretKey {
					t.Fatalf("Authorization = %q", got)
				}
			}},
		{"apikey_query", connectors.Auth{Type: connectors.AuthAPIKey, Name: "api_key", In: connectors.InQuery}, client.ConnectionInput{ApiKey: &[]string{secretKey}[0]},
			func(t *testing.T, s seen) {
				if !strings.Contains(s.RequestURI, "api_key="+secretKey) {
					t.Fatalf("request URI %q lacks the key", s.RequestURI)
				}
			}},
		{"apikey_cookie", connectors.Auth{Type: connectors.AuthAPIKey, Name: "session_key", In: connectors.InCookie}, client.ConnectionInput{ApiKey: &[]string{secretKey}[0]},
			func(t *testing.T, s seen) {
				if got := s.Header.Get("Cookie"); got != "session_key="+secretKey {
					t.Fatalf("Cookie = %q", got)
				}
			}},
		{"bearer", connectors.Auth{Type: connectors.AuthBearer}, client.ConnectionInput{Token: &[]string{secretToken}[0]},
			func(t *testing.T, s seen) {
				if got := s.Header.Get("Authorization"); got != "Bearer "+secretToken {
					t.Fatalf("Authorization = %q", got)
				}
			}},
		{"basic", connectors.Auth{Type: connectors.AuthBasic}, client.ConnectionInput{Username: &[]string{"ada"}[0], Password: &[]string{secretPassword}[0]},
			func(t *testing.T, s seen) {
				if got := s.Header.Get("Authorization"); got != basicWant {
					t.Fatalf("Authorization = %q, want %q", got, basicWant)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.connector(connectors.Connector{Name: tt.name, BaseURL: up.URL + "/api", Auth: tt.auth},
				getAction("me", "/me", nil))
			e.connection(tt.name, tt.conn)
			res := e.mustRun(tt.name, "me", nil)
			tt.check(t, up.last(t))
			if res.Status != 200 {
				t.Fatalf("status %d", res.Status)
			}
			var got map[string]any
			if err := res.Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got["uri"] == nil || !strings.HasPrefix(got["uri"].(string), "/api/me") {
				t.Fatalf("result %v", got)
			}
			if bytes.Contains(res.Result, []byte("TOPSECRET")) {
				t.Fatalf("the echoed credential reached the result: %s", res.Result)
			}
			if !bytes.Contains(res.Result, []byte(connectors.Redacted)) {
				t.Fatalf("result %s does not show the redaction", res.Result)
			}
		})
	}
}

// TestRunPathEscaping runs the escaping table against a real upstream and
// checks the exact request line it received.
func TestRunPathEscaping(t *testing.T) {
	e := newIEnv(t)
	up := newUpstream(t, echo)
	e.connector(connectors.Connector{Name: "files", BaseURL: up.URL + "/v1/", Auth: connectors.Auth{Type: connectors.AuthNone}},
		getAction("get", "/files/{{params.id}}/meta", map[string]connectors.Parameter{"id": {Type: connectors.TypeString, Required: true}}))
	tests := []struct {
		value string
		uri   string // "" when refused with 400
	}{
		{"report.pdf", "/v1/files/report.pdf/meta"},
		{"../x", ""},
		{"a/b", ""},
		{"%2F", "/v1/files/%252F/meta"},
		{"?", ""},
		{"#", ""},
		{"..", ""},
		{"café ☕", "/v1/files/caf%C3%A9%20%E2%98%95/meta"},
		{"", ""},
		{"a\r\nb", ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.value), func(t *testing.T) {
			before := len(up.requests())
			res, ae := e.run("files", "get", map[string]any{"id": tt.value})
			if tt.uri == "" {
				wantAPIError(t, ae, 400, "invalid_request", "params.id")
				if len(up.requests()) != before {
					t.Fatal("a refused value still reached the upstream")
				}
				return
			}
			if ae != nil {
				t.Fatal(ae)
			}
			if got := up.last(t).RequestURI; got != tt.uri {
				t.Fatalf("upstream saw %s, want %s (result %s)", got, tt.uri, res.Result)
			}
		})
	}
}

func TestRunParams(t *testing.T) {
	e := newIEnv(t)
	up := newUpstream(t, echo)
	e.connector(connectors.Connector{Name: "crm", BaseURL: up.URL, Auth: connectors.Auth{Type: connectors.AuthNone}},
		connectors.Action{Name: "create", Method: "POST", Path: "/accounts/{{params.account}}/contacts",
			Parameters: map[string]connectors.Parameter{
				"account": {Type: connectors.TypeString, Required: true},
				"name":    {Type: connectors.TypeString, Required: true},
				"age":     {Type: connectors.TypeInteger},
				"plan":    {Type: connectors.TypeString, Enum: []any{"free", "pro"}, Default: "free"},
				"trace":   {Type: connectors.TypeString, In: connectors.InHeader},
				"dry":     {Type: connectors.TypeBoolean, In: connectors.InQuery},
			},
			Headers: map[string]string{"X-Trace-Copy": "copy-{{params.trace}}"},
		})
	t.Run("placed", func(t *testing.T) {
		e.mustRun("crm", "create", map[string]any{"account": "acme", "name": "Ada", "age": 36, "trace": "t1", "dry": true})
		s := up.last(t)
		if s.Method != "POST" || s.RequestURI != "/accounts/acme/contacts?dry=true" {
			t.Fatalf("request %s %s", s.Method, s.RequestURI)
		}
		if s.Header.Get("Trace") != "t1" || s.Header.Get("X-Trace-Copy") != "copy-t1" || s.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("headers %v", s.Header)
		}
		if s.Body != `{"age":36,"name":"Ada","plan":"free"}` {
			t.Fatalf("body %s", s.Body)
		}
	})
	t.Run("every problem in one 400", func(t *testing.T) {
		before := len(up.requests())
		_, ae := e.run("crm", "create", map[string]any{"age": "old", "plan": "gold", "extra": 1, "trace": "a\nb"})
		wantAPIError(t, ae, 400, "invalid_request")
		raw, _ := json.Marshal(ae.Details["problems"])
		for _, f := range []string{"params.account", "params.name", "params.age", "params.plan", "params.extra"} {
			if !strings.Contains(string(raw), `"`+f+`"`) {
				t.Errorf("problems %s do not name %s", raw, f)
			}
		}
		if len(up.requests()) != before {
			t.Fatal("an invalid call reached the upstream")
		}
	})
	t.Run("CR LF in a header refused", func(t *testing.T) {
		_, ae := e.run("crm", "create", map[string]any{"account": "a", "name": "n", "trace": "x\r\nX-Injected: 1"})
		wantAPIError(t, ae, 400, "invalid_request", "CR, LF")
	})
	t.Run("unknown action and connector", func(t *testing.T) {
		_, ae := e.run("crm", "nope", nil)
		wantAPIError(t, ae, 404, "not_found", `action "nope"`)
		_, ae = e.run("nope", "create", nil)
		wantAPIError(t, ae, 404, "not_found", `connector "nope"`)
	})
}

func TestRunResultShapes(t *testing.T) {
	e := newIEnv(t)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_, _ = io.WriteString(w, `{"b":1,"a":[true,null,"x"],"big":12345678901234567890}`)
		case "/text":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "hello \"world\"")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/badjson":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{not json`)
		}
	})
	e.connector(connectors.Connector{Name: "shapes", BaseURL: up.URL, Auth: connectors.Auth{Type: connectors.AuthNone}},
		getAction("json", "/json", nil), getAction("text", "/text", nil), getAction("empty", "/empty", nil), getAction("badjson", "/badjson", nil))
	for action, want := range map[string]string{
		"json":    `{"b":1,"a":[true,null,"x"],"big":12345678901234567890}`,
		"text":    `"hello \"world\""`,
		"empty":   `null`,
		"badjson": `"{not json"`,
	} {
		t.Run(action, func(t *testing.T) {
			res := e.mustRun("shapes", action, nil)
			if string(res.Result) != want {
				t.Fatalf("result %s, want %s", res.Result, want)
			}
		})
	}
}

// TestRunEgress: loopback is refused unless allowed; redirects to
// loopback and to the metadata address are refused; a redirect to another
// origin loses the credential; at most 5 redirects.
func TestRunEgress(t *testing.T) {
	t.Run("loopback refused by default", func(t *testing.T) {
		e := newIEnv(t, func(c *config.Config) { c.Egress.Allow = nil })
		up := newUpstream(t, echo)
		port := up.Listener.Addr().(*net.TCPAddr).Port
		// Saving such a connector is refused (TestConnectorBaseURLEgress);
		// these were stored while egress.allow still let loopback through,
		// and the dial refuses them all the same.
		for _, c := range []connectors.Connector{
			{Name: "local", BaseURL: up.URL, Auth: connectors.Auth{Type: connectors.AuthNone}, Version: 1},
			{Name: "byname", BaseURL: fmt.Sprintf("http://localhost:%d", port), Auth: connectors.Auth{Type: connectors.AuthNone}, Version: 1},
		} {
			err := e.Store.Update(context.Background(), func(tx store.Tx) error {
				if err := store.PutJSON(tx, connectors.BucketConnectors, c.Name, c); err != nil {
					return err
				}
				a := getAction("get", "/", nil)
				a.Connector, a.Version = c.Name, 1
				return store.PutJSON(tx, connectors.BucketActions, c.Name+"/get", a)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		_, ae := e.run("local", "get", nil)
		wantAPIError(t, ae, 403, "egress_denied", "127.0.0.1 is a loopback address", "SWITCHBOARD_EGRESS_ALLOW")
		_, ae = e.run("byname", "get", nil)
		wantAPIError(t, ae, 403, "egress_denied", "resolved from localhost", "loopback")
		if n := len(up.requests()); n != 0 {
			t.Fatalf("the upstream got %d requests", n)
		}
	})

	// The upstream lives on 127.0.0.2 and only that address is allowed.
	e := newIEnv(t, func(c *config.Config) { c.Egress.Allow = []string{"127.0.0.2/32"} })
	forbidden := newUpstream(t, echo) // on 127.0.0.1
	other := newUpstreamOn(t, "127.0.0.2", echo)
	var up *upstream
	up = newUpstreamOn(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-loopback":
			http.Redirect(w, r, forbidden.URL+"/", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/", http.StatusFound)
		case "/to-other-origin":
			http.Redirect(w, r, other.URL+"/landing?next=1", http.StatusTemporaryRedirect)
		case "/same-origin":
			http.Redirect(w, r, "/landing", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			echo(w, r)
		}
	})
	auth := connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-API-Key", In: connectors.InHeader}
	qauth := connectors.Auth{Type: connectors.AuthAPIKey, Name: "key", In: connectors.InQuery}
	actions := []connectors.Action{
		getAction("loopback", "/to-loopback", nil), getAction("metadata", "/to-metadata", nil),
		getAction("other", "/to-other-origin", nil), getAction("same", "/same-origin", nil), getAction("loop", "/loop", nil),
	}
	e.connector(connectors.Connector{Name: "redir", BaseURL: up.URL, Auth: auth}, actions...)
	e.connector(connectors.Connector{Name: "qredir", BaseURL: up.URL, Auth: qauth}, actions...)
	e.connection("redir", client.ConnectionInput{ApiKey: &[]string{secretKey}[0]})
	e.connection("qredir", client.ConnectionInput{ApiKey: &[]string{secretKey}[0]})

	t.Run("redirect to 127.0.0.1 refused", func(t *testing.T) {
		_, ae := e.run("redir", "loopback", nil)
		wantAPIError(t, ae, 403, "egress_denied", "127.0.0.1 is a loopback address")
		if len(forbidden.requests()) != 0 {
			t.Fatal("the loopback target was reached")
		}
	})
	t.Run("redirect to 169.254.169.254 refused", func(t *testing.T) {
		_, ae := e.run("redir", "metadata", nil)
		wantAPIError(t, ae, 403, "egress_denied", "169.254.169.254 is a link-local cloud metadata address")
	})
	t.Run("credentials stripped on another origin", func(t *testing.T) {
		for _, c := range []string{"redir", "qredir"} {
			res := e.mustRun(c, "other", nil)
			s := other.last(t)
			if s.Header.Get("X-API-Key") != "" || strings.Contains(s.RequestURI, "key=") || s.Header.Get("Referer") != "" {
				t.Fatalf("%s: the other origin received the credential: %s %v", c, s.RequestURI, s.Header)
			}
			if s.RequestURI != "/landing?next=1" || res.Status != 200 {
				t.Fatalf("%s: other origin saw %s", c, s.RequestURI)
			}
		}
	})
	t.Run("credentials kept on the same origin", func(t *testing.T) {
		e.mustRun("redir", "same", nil)
		if s := up.last(t); s.RequestURI != "/landing" || s.Header.Get("X-API-Key") != secretKey {
			t.Fatalf("same origin: %s without the key", s.RequestURI)
		}
	})
	t.Run("at most 5 redirects", func(t *testing.T) {
		before := len(up.requests())
		_, ae := e.run("redir", "loop", nil)
		wantAPIError(t, ae, 502, "upstream_error", "more than 5")
		if n := len(up.requests()) - before; n != 6 {
			t.Fatalf("%d requests, want 6 (the call and 5 redirects)", n)
		}
	})
}

func TestRunUpstreamFailures(t *testing.T) {
	e := newIEnv(t, func(c *config.Config) { c.Connectors.MaxRetryAfter = config.Duration(3 * time.Second) })
	var flaky, slowCalls atomic.Int32
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			slowCalls.Add(1)
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		case "/big":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `"`+strings.Repeat("x", 11<<20)+`"`)
		case "/big-chunked":
			w.Header().Set("Content-Type", "text/plain")
			for range 12 {
				_, _ = w.Write(bytes.Repeat([]byte("y"), 1<<20))
				w.(http.Flusher).Flush()
			}
		case "/flaky":
			if flaky.Add(1) == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			_, _ = io.WriteString(w, `{"ok":true}`)
		case "/throttled":
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":"slow down"}`)
		case "/always-503":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/denied":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = fmt.Fprintf(w, `{"error":"invalid api key %s","pad":%q}`, r.Header.Get("X-API-Key"), strings.Repeat("p", 4000))
		}
	})
	auth := connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-API-Key", In: connectors.InHeader}
	slow := getAction("slow", "/slow", nil)
	slow.TimeoutMs = 300
	e.connector(connectors.Connector{Name: "up", BaseURL: up.URL, Auth: auth},
		slow, getAction("big", "/big", nil), getAction("bigchunked", "/big-chunked", nil), getAction("flaky", "/flaky", nil),
		getAction("throttled", "/throttled", nil), getAction("always503", "/always-503", nil), getAction("denied", "/denied", nil),
		connectors.Action{Name: "postflaky", Method: "POST", Path: "/always-503"})
	e.connection("up", client.ConnectionInput{ApiKey: &[]string{secretKey}[0]})

	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		_, ae := e.run("up", "slow", nil)
		wantAPIError(t, ae, 504, "upstream_timeout", "did not answer within 300ms")
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("took %s", d)
		}
	})
	t.Run("oversized body with length", func(t *testing.T) {
		_, ae := e.run("up", "big", nil)
		wantAPIError(t, ae, 502, "upstream_error", "exceeds the limit of 10485760 bytes", "connectors.maxResponseBytes")
	})
	t.Run("oversized body chunked", func(t *testing.T) {
		_, ae := e.run("up", "bigchunked", nil)
		wantAPIError(t, ae, 502, "upstream_error", "exceeds the limit of 10485760 bytes")
	})
	t.Run("retry honours Retry-After", func(t *testing.T) {
		start := time.Now()
		res := e.mustRun("up", "flaky", nil)
		if d := time.Since(start); d < time.Second {
			t.Fatalf("retried after %s, before the upstream's Retry-After of 1s", d)
		}
		if res.Status != 200 || flaky.Load() != 2 {
			t.Fatalf("status %d after %d calls", res.Status, flaky.Load())
		}
	})
	t.Run("Retry-After over the cap is not waited for", func(t *testing.T) {
		before := len(up.requests())
		start := time.Now()
		_, ae := e.run("up", "throttled", nil)
		wantAPIError(t, ae, 502, "upstream_error", "429")
		if d := time.Since(start); d > 2*time.Second || len(up.requests())-before != 1 {
			t.Fatalf("%d calls in %s, want one at once", len(up.requests())-before, d)
		}
		if ae.Details["status"] != float64(429) || ae.Details["retryAfterSeconds"] != float64(120) {
			t.Fatalf("details %v", ae.Details)
		}
	})
	t.Run("retries exhausted", func(t *testing.T) {
		before := len(up.requests())
		_, ae := e.run("up", "always503", nil)
		wantAPIError(t, ae, 502, "upstream_error", "503")
		if n := len(up.requests()) - before; n != 3 {
			t.Fatalf("%d calls, want 3 (1 + connectors.retries=2)", n)
		}
	})
	t.Run("POST is not retried", func(t *testing.T) {
		before := len(up.requests())
		_, ae := e.run("up", "postflaky", nil)
		wantAPIError(t, ae, 502, "upstream_error")
		if n := len(up.requests()) - before; n != 1 {
			t.Fatalf("%d calls, want 1", n)
		}
	})
	t.Run("non-2xx with a truncated secret-free body", func(t *testing.T) {
		_, ae := e.run("up", "denied", nil)
		wantAPIError(t, ae, 502, "upstream_error", "401")
		body, _ := ae.Details["body"].(string)
		if ae.Details["status"] != float64(401) || !strings.Contains(body, "invalid api key "+connectors.Redacted) {
			t.Fatalf("details %v", ae.Details)
		}
		if len(body) > connectors.MaxErrorBodyBytes || ae.Details["bodyTruncated"] != true {
			t.Fatalf("body of %d bytes not truncated", len(body))
		}
	})
}

// TestRunTransformations runs scripts that work, throw, loop forever and
// exhaust memory; the server answers normally afterwards.
func TestRunTransformations(t *testing.T) {
	// Long enough for the working scripts (building 10001 levels) on a
	// loaded CI machine; the runaway ones wait it out.
	limit := time.Second
	if integrationsRace {
		limit = 5 * time.Second // the race detector slows scripts down tenfold
	}
	e := newIEnv(t, func(c *config.Config) { c.Connectors.TransformTimeout = config.Duration(limit) })
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Remaining", "41")
		_, _ = io.WriteString(w, `{"name":"Oslo","main":{"temp":-3.5},"list":[{"id":1},{"id":2}]}`)
	})
	script := func(name, s string) connectors.Action {
		a := getAction(name, "/weather", nil)
		a.Transformation = s
		return a
	}
	e.connector(connectors.Connector{Name: "weather", BaseURL: up.URL, Auth: connectors.Auth{Type: connectors.AuthNone}},
		script("forecast", "return {city: data.name, celsius: data.main.temp, ids: data.list.map(x => x.id), left: Number(response.headers['x-remaining']), status: response.status}"),
		script("throws", "const x = data.missing;\nreturn x.deeper;"),
		script("loops", "while (true) {}"),
		script("bomb", "return 'x'.repeat(1e9).length"),
		script("grows", "const a = [];\nfor (;;) { a.push({n: a.length, s: 'item ' + a.length}) }"),
		script("huge", "return 'y'.repeat(2 * 1024 * 1024)"),
		script("escape", "return [typeof require, typeof process, typeof setTimeout, typeof fetch]"),
		script("restringify", "JSON.stringify = () => ({not: 'a string'}); return {city: data.name}"),
		script("rejson", "globalThis.JSON = {stringify: () => { throw 1 }}; return [data.main.temp]"),
		script("deep", "let o = data.name; for (let i = 0; i < 10001; i++) o = [o]; return o"),
	)
	heapBefore := heapInUse()

	t.Run("result", func(t *testing.T) {
		res := e.mustRun("weather", "forecast", nil)
		if want := `{"city":"Oslo","celsius":-3.5,"ids":[1,2],"left":41,"status":200}`; string(res.Result) != want {
			t.Fatalf("result %s, want %s", res.Result, want)
		}
	})
	t.Run("no host access", func(t *testing.T) {
		res := e.mustRun("weather", "escape", nil)
		if string(res.Result) != `["undefined","undefined","undefined","undefined"]` {
			t.Fatalf("result %s", res.Result)
		}
	})
	t.Run("a script's own JSON.stringify does not serialise its result", func(t *testing.T) {
		for action, want := range map[string]string{"restringify": `{"city":"Oslo"}`, "rejson": `[-3.5]`} {
			if res := e.mustRun("weather", action, nil); string(res.Result) != want {
				t.Fatalf("%s: result %s, want %s", action, res.Result, want)
			}
		}
	})
	failures := []struct {
		action string
		msg    []string
		line   float64
	}{
		{"deep", []string{"weather.deep returned a result that nests deeper than 1000 levels"}, 0},
		{"throws", []string{"weather.throws failed at line 2", "TypeError"}, 2},
		{"loops", []string{"exceeded its time limit of " + limit.String()}, 1},
		{"bomb", []string{"exceeded its memory limit of 64 MiB"}, 0},
		{"huge", []string{"over the limit of 1048576 bytes"}, 0},
	}
	for _, f := range failures {
		t.Run(f.action, func(t *testing.T) {
			if f.action == "bomb" && integrationsRace {
				t.Skip("a race build has no kernel memory limit for workers")
			}
			_, ae := e.run("weather", f.action, nil)
			wantAPIError(t, ae, 422, "transformation_failed", f.msg...)
			if f.line > 0 && ae.Details["line"] != f.line {
				t.Fatalf("details %v, want line %v", ae.Details, f.line)
			}
			// The server still answers, and so does the sandbox.
			if res, err := e.admin.GetHealthzWithResponse(context.Background()); err != nil || res.StatusCode() != 200 {
				t.Fatalf("healthz after %s: %v", f.action, err)
			}
			e.mustRun("weather", "forecast", nil)
		})
	}
	t.Run("ever-growing array", func(t *testing.T) {
		if integrationsRace {
			t.Skip("a race build has no kernel memory limit for workers")
		}
		_, ae := e.run("weather", "grows", nil)
		wantAPIError(t, ae, 422, "transformation_failed")
		if !strings.Contains(ae.Message, "memory limit") && !strings.Contains(ae.Message, "time limit") {
			t.Fatalf("message %q names neither limit", ae.Message)
		}
		e.mustRun("weather", "forecast", nil)
	})
	if grown := int64(heapInUse()) - int64(heapBefore); grown > 64<<20 {
		t.Fatalf("the server's heap grew by %d MiB", grown>>20)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func TestConnectionsLifecycle(t *testing.T) {
	e := newIEnv(t)
	ctx := context.Background()
	up := newUpstream(t, echo)
	e.connector(connectors.Connector{Name: "billing", BaseURL: up.URL, Auth: connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-API-Key", In: connectors.InHeader}},
		getAction("me", "/me", nil))
	e.connector(connectors.Connector{Name: "open", BaseURL: up.URL, Auth: connectors.Auth{Type: connectors.AuthNone}}, getAction("me", "/me", nil))

	// Running before a connection exists says what to do.
	_, ae := e.run("billing", "me", nil)
	wantAPIError(t, ae, 404, "not_found", `connection "default"`, "POST /v1/connectors/billing/connections")

	res, err := e.admin.CreateConnectionWithResponse(ctx, "billing", client.ConnectionInput{ApiKey: &[]string{secretKey}[0]})
	if err != nil || res.StatusCode() != 201 {
		t.Fatalf("create: %v %d %s", err, res.StatusCode(), res.Body)
	}
	c := res.JSON201
	if c.Name != "default" || c.Status != client.Active || c.AuthType != client.ApiKey || c.Version != 1 {
		t.Fatalf("created %+v", c)
	}
	if res.HTTPResponse.Header.Get("ETag") != `"1"` || res.HTTPResponse.Header.Get("Location") != "/v1/connectors/billing/connections/default" {
		t.Fatalf("headers %v", res.HTTPResponse.Header)
	}
	e.mustRun("billing", "me", nil)

	t.Run("refusals", func(t *testing.T) {
		tests := []struct {
			connector string
			in        client.ConnectionInput
			status    int
			want      string
		}{
			{"billing", client.ConnectionInput{ApiKey: &[]string{secretKey}[0]}, 409, "already exists"},
			{"billing", client.ConnectionInput{Name: &[]string{"second"}[0], Token: &[]string{secretToken}[0]}, 422, "invalid connection"},
			{"billing", client.ConnectionInput{Name: &[]string{"Bad Name"}[0], ApiKey: &[]string{secretKey}[0]}, 422, "invalid connection"},
			{"billing", client.ConnectionInput{Name: &[]string{"nl"}[0], ApiKey: &[]string{"a\r\nb" + secretKey}[0]}, 422, "invalid connection"},
			{"open", client.ConnectionInput{ApiKey: &[]string{secretKey}[0]}, 422, "invalid connection"},
			{"missing", client.ConnectionInput{ApiKey: &[]string{secretKey}[0]}, 404, "not found"},
		}
		for _, tt := range tests {
			res, err := e.admin.CreateConnectionWithResponse(ctx, tt.connector, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode() != tt.status || !strings.Contains(string(res.Body), tt.want) {
				t.Errorf("%s %+v: %d %s", tt.connector, tt.in, res.StatusCode(), res.Body)
			}
		}
	})

	t.Run("read", func(t *testing.T) {
		get, err := e.admin.GetConnectionWithResponse(ctx, "billing", "default")
		if err != nil || get.StatusCode() != 200 || get.JSON200.Name != "default" {
			t.Fatalf("get: %v %s", err, get.Body)
		}
		list, err := e.admin.ListConnectionsWithResponse(ctx, "billing", nil)
		if err != nil || list.StatusCode() != 200 || len(list.JSON200.Data) != 1 {
			t.Fatalf("list: %v %s", err, list.Body)
		}
		for _, body := range [][]byte{get.Body, list.Body} {
			if bytes.Contains(body, []byte(`"apiKey":`)) || bytes.Contains(body, []byte(secretKey)) {
				t.Fatalf("a read shows a credential field: %s", body)
			}
		}
	})

	t.Run("rotate", func(t *testing.T) {
		newKey := secretKey + "_2"
		stale := `"7"`
		res, err := e.admin.ReplaceConnectionWithResponse(ctx, "billing", "default", &client.ReplaceConnectionParams{IfMatch: &stale}, client.ConnectionCredentials{ApiKey: &newKey})
		if err != nil || res.StatusCode() != 412 {
			t.Fatalf("stale If-Match: %v %d", err, res.StatusCode())
		}
		cur := `"1"`
		res, err = e.admin.ReplaceConnectionWithResponse(ctx, "billing", "default", &client.ReplaceConnectionParams{IfMatch: &cur}, client.ConnectionCredentials{ApiKey: &newKey})
		if err != nil || res.StatusCode() != 200 || res.JSON200.Version != 2 {
			t.Fatalf("replace: %v %s", err, res.Body)
		}
		e.mustRun("billing", "me", nil)
		if got := up.last(t).Header.Get("X-API-Key"); got != newKey {
			t.Fatal("the rotated key was not used")
		}
	})

	t.Run("scopes", func(t *testing.T) {
		_, readKey, err := e.Server.Keys().Create(ctx, auth.NewAPIKeyInput{Name: "reader", Scopes: []string{auth.ScopeConnectorsRead}})
		if err != nil {
			t.Fatal(err)
		}
		reader := e.ClientWithKey(t, readKey)
		if res, _ := reader.ListConnectionsWithResponse(ctx, "billing", nil); res.StatusCode() != 200 {
			t.Fatalf("read with connectors:read: %d", res.StatusCode())
		}
		if res, _ := reader.DeleteConnectionWithResponse(ctx, "billing", "default", nil); res.StatusCode() != 403 {
			t.Fatalf("delete with connectors:read: %d", res.StatusCode())
		}
		sb, _ := client.New(e.URL, readKey, client.WithHTTPClient(e.HTTPClient(t)))
		_, err = sb.Integrations("billing").Run(ctx, "me", nil)
		if !client.IsCode(err, "forbidden") {
			t.Fatalf("run with connectors:read: %v", err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		res, err := e.admin.DeleteConnectionWithResponse(ctx, "billing", "default", nil)
		if err != nil || res.StatusCode() != 204 {
			t.Fatalf("delete: %v %d", err, res.StatusCode())
		}
		get, _ := e.admin.GetConnectionWithResponse(ctx, "billing", "default")
		if get.StatusCode() != 404 {
			t.Fatalf("get after delete: %d", get.StatusCode())
		}
		_, ae := e.run("billing", "me", nil)
		wantAPIError(t, ae, 404, "not_found")
	})

	t.Run("events", func(t *testing.T) {
		for _, typ := range []client.EventType{client.EventTypeConnectionCreated, client.EventTypeConnectionDeleted} {
			res, err := e.admin.ListEventsWithResponse(ctx, &client.ListEventsParams{Type: &typ})
			if err != nil || res.StatusCode() != 200 || len(res.JSON200.Data) == 0 {
				t.Fatalf("%s events: %v %s", typ, err, res.Body)
			}
			if !bytes.Contains(res.Body, []byte(`"connector":"billing"`)) {
				t.Fatalf("%s event data %s", typ, res.Body)
			}
		}
	})

	t.Run("connector deletion deletes connections", func(t *testing.T) {
		e.connection("billing", client.ConnectionInput{Name: &[]string{"acct-2"}[0], ApiKey: &[]string{secretKey}[0]})
		if err := e.Server.Connectors().DeleteConnector(ctx, "billing", 0); err != nil {
			t.Fatal(err)
		}
		e.connector(connectors.Connector{Name: "billing", BaseURL: up.URL, Auth: connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-API-Key", In: connectors.InHeader}})
		list, _ := e.admin.ListConnectionsWithResponse(ctx, "billing", nil)
		if list.StatusCode() != 200 || len(list.JSON200.Data) != 0 {
			t.Fatalf("connections survived their connector: %s", list.Body)
		}
	})
}

func TestInvocationLog(t *testing.T) {
	e := newIEnv(t, func(c *config.Config) { c.Connectors.InvocationLogSize = 5 })
	ctx := context.Background()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		echo(w, r)
	})
	e.connector(connectors.Connector{Name: "logged", BaseURL: up.URL, Auth: connectors.Auth{Type: connectors.AuthBearer}},
		getAction("ok", "/ok", map[string]connectors.Parameter{"q": {Type: connectors.TypeString}}), getAction("fail", "/fail", nil))
	e.connection("logged", client.ConnectionInput{Token: &[]string{secretToken}[0]})
	for i := range 7 {
		e.mustRun("logged", "ok", map[string]any{"q": fmt.Sprintf("secret-param-%d", i)})
	}
	_, ae := e.run("logged", "fail", nil)
	wantAPIError(t, ae, 502, "upstream_error")

	res, err := e.admin.ListInvocationsWithResponse(ctx, "logged", nil)
	if err != nil || res.StatusCode() != 200 {
		t.Fatalf("list: %v %s", err, res.Body)
	}
	data := res.JSON200.Data
	if len(data) != 5 {
		t.Fatalf("%d entries, want the last 5", len(data))
	}
	first := data[0]
	if first.Action != "fail" || first.ErrorCode == nil || *first.ErrorCode != "upstream_error" || first.Status == nil || *first.Status != 404 {
		t.Fatalf("newest entry %+v", first)
	}
	if first.RequestId == nil || *first.RequestId != ae.RequestID || first.Connection == nil || *first.Connection != "default" {
		t.Fatalf("entry does not name its request and connection: %+v", first)
	}
	for _, inv := range data[1:] {
		if inv.Action != "ok" || inv.ErrorCode != nil || *inv.Status != 200 {
			t.Fatalf("entry %+v", inv)
		}
	}
	if bytes.Contains(res.Body, []byte("secret-param")) {
		t.Fatal("the log holds parameter values")
	}
	limit := 2
	page, _ := e.admin.ListInvocationsWithResponse(ctx, "logged", &client.ListInvocationsParams{Limit: &limit})
	if len(page.JSON200.Data) != 2 || page.JSON200.NextCursor == nil {
		t.Fatalf("page %s", page.Body)
	}
	next, _ := e.admin.ListInvocationsWithResponse(ctx, "logged", &client.ListInvocationsParams{Limit: &limit, Cursor: page.JSON200.NextCursor})
	if len(next.JSON200.Data) != 2 || next.JSON200.Data[0].CreatedAt.After(page.JSON200.Data[1].CreatedAt) {
		t.Fatalf("second page %s", next.Body)
	}
	if res, _ := e.admin.ListInvocationsWithResponse(ctx, "nope", nil); res.StatusCode() != 404 {
		t.Fatalf("unknown connector: %d", res.StatusCode())
	}
}

// TestInvocationLogFlushedOnClose checks that entries waiting in memory
// are written when the server closes.
func TestInvocationLogFlushedOnClose(t *testing.T) {
	e := newIEnv(t)
	up := newUpstream(t, echo)
	e.connector(connectors.Connector{Name: "flush", BaseURL: up.URL, Auth: connectors.Auth{Type: connectors.AuthNone}}, getAction("ok", "/", nil))
	e.mustRun("flush", "ok", nil)
	count := func() int {
		n := 0
		if err := e.Store.View(context.Background(), func(tx store.Tx) error {
			return tx.Scan(connectors.BucketInvocations, "flush/", "", func(string, []byte) (bool, error) { n++; return true, nil })
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("%d entries written at once; the log should batch", n)
	}
	if err := e.Server.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d entries after Close, want 1", n)
	}
}

// TestRunSeesDefinitionChanges: runs are served from an in-memory copy of
// the definitions and credentials while the store reports no change; every
// change through the API must be seen by the very next run.
func TestRunSeesDefinitionChanges(t *testing.T) {
	e := newIEnv(t)
	ctx := context.Background()
	up := newUpstream(t, echo)
	svc := e.Server.Connectors()
	conn := connectors.Connector{Name: "crm", BaseURL: up.URL, Auth: connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-API-Key", In: connectors.InHeader}}
	e.connector(conn, getAction("me", "/v1/me", nil))
	e.connection("crm", client.ConnectionInput{ApiKey: &[]string{secretKey}[0]})
	e.mustRun("crm", "me", nil) // cached from here on

	for _, tc := range []struct {
		name   string
		change func() error
		check  func(t *testing.T)
	}{
		{"action replaced", func() error {
			a, err := svc.GetAction(ctx, "crm", "me")
			if err != nil {
				return err
			}
			a.Path = "/v2/me"
			_, err = svc.ReplaceAction(ctx, "crm", "me", a, a.Version)
			return err
		}, func(t *testing.T) {
			e.mustRun("crm", "me", nil)
			if got := up.last(t).RequestURI; got != "/v2/me" {
				t.Fatalf("upstream saw %s, want the replaced path /v2/me", got)
			}
		}},
		{"connector replaced", func() error {
			c, err := svc.GetConnector(ctx, "crm")
			if err != nil {
				return err
			}
			c.Auth.Name = "X-Other-Key"
			_, err = svc.ReplaceConnector(ctx, "crm", c, c.Version)
			return err
		}, func(t *testing.T) {
			// The key is not moved to the new header: the connection
			// needs it again, then it goes where the connector now says.
			n := len(up.requests())
			_, ae := e.run("crm", "me", nil)
			wantAPIError(t, ae, 409, "conflict", "reauth_required")
			if len(up.requests()) != n {
				t.Fatal("the upstream was called with a reauth_required connection")
			}
			res, err := e.admin.ReplaceConnectionWithResponse(ctx, "crm", "default", nil, client.ConnectionCredentials{ApiKey: &[]string{secretKey}[0]})
			if err != nil || res.StatusCode() != 200 {
				t.Fatalf("replace connection: %v %d %s", err, res.StatusCode(), res.Body)
			}
			e.mustRun("crm", "me", nil)
			if h := up.last(t).Header; h.Get("X-Other-Key") != secretKey || h.Get("X-API-Key") != "" {
				t.Fatalf("credential not sent in the replaced header: %v", h)
			}
		}},
		{"action deleted", func() error { return svc.DeleteAction(ctx, "crm", "me", 0) }, func(t *testing.T) {
			_, ae := e.run("crm", "me", nil)
			wantAPIError(t, ae, 404, "not_found")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.change(); err != nil {
				t.Fatal(err)
			}
			tc.check(t)
		})
	}
	e.assertNoSecrets()
}
