package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn/oauthtest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// ocEnv is a Switchboard server, a real OAuth 2.0 authorization server
// (oauthtest, on go-oauth2) and an application to redirect back to, with
// everything Switchboard logs and answers recorded for the leak check.
type ocEnv struct {
	*servertest.Env
	t    *testing.T
	as   *oauthtest.Server
	app  *httptest.Server
	logs *ocBuffer
	seen *ocBuffer // every response of Switchboard, headers and body
}

type ocBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *ocBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *ocBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newOCEnv(t *testing.T, o oauthtest.Options, opts ...servertest.Option) *ocEnv {
	t.Helper()
	logs := &ocBuffer{}
	opts = append([]servertest.Option{func(c *config.Config) { c.Egress.Allow = []string{"127.0.0.0/8"} }}, opts...)
	env := servertest.NewWithLogger(t, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), opts...)
	e := &ocEnv{Env: env, t: t, as: oauthtest.New(t, o), logs: logs, seen: &ocBuffer{}}
	e.app = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "app: %s", r.URL.RawQuery)
	}))
	t.Cleanup(e.app.Close)
	t.Cleanup(e.checkNoLeaks)
	return e
}

// checkNoLeaks asserts that no token, authorization code or client secret
// reached a log line or a response of Switchboard.
func (e *ocEnv) checkNoLeaks() {
	all := e.logs.String() + "\n" + e.seen.String()
	for _, s := range e.as.Secrets() {
		if strings.Contains(all, s) {
			e.t.Errorf("a token, code or the client secret appeared in Switchboard's logs or responses")
			return
		}
	}
}

// recording wraps a transport and records Switchboard's responses.
type recording struct {
	base http.RoundTripper
	host string
	seen *ocBuffer
}

func (r recording) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.base.RoundTrip(req)
	if err != nil || req.URL.Host != r.host {
		return res, err
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	fmt.Fprintf(r.seen, "%d %v\n%s\n", res.StatusCode, res.Header, body)
	return res, nil
}

// browser is an HTTP client that follows redirects and sends the admin
// key to Switchboard only (as a backend calling /connect would, then the
// user's browser following Location).
func (e *ocEnv) browser(follow bool, opts ...servertest.TransportOption) *http.Client {
	c := e.HTTPClient(e.t, append([]servertest.TransportOption{servertest.WithKey(e.AdminKey)}, opts...)...)
	u, _ := url.Parse(e.URL)
	c.Transport = recording{base: c.Transport, host: u.Host, seen: e.seen}
	if !follow {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c
}

func (e *ocEnv) client() *client.ClientWithResponses {
	c, err := client.NewClientWithResponses(e.URL, client.WithHTTPClient(e.browser(false)))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// createOAuthConnector creates connector "crm" on the authorization server.
func (e *ocEnv) createOAuthConnector(name string, grant client.ConnectorAuthGrant, mutate func(*client.ConnectorAuth)) {
	e.t.Helper()
	a := client.ConnectorAuth{
		Type: client.ConnectorAuthOAuth2, Grant: &grant,
		TokenUrl: connStr(e.as.TokenURL()), ClientId: connStr(e.as.ClientID), ClientSecret: connStr(e.as.ClientSecret),
		Scopes: &[]string{"read", "write"},
	}
	if grant == client.ConnectorGrantAuthorizationCode {
		a.AuthorizationUrl = connStr(e.as.AuthorizeURL())
		a.RedirectUrls = &[]string{e.app.URL + "/done"}
		a.AuthorizationParams = &map[string]string{"audience": "https://api.example"}
	}
	if mutate != nil {
		mutate(&a)
	}
	createConnector(e.t, e.client(), client.ConnectorInput{Name: &name, BaseUrl: e.as.APIURL(), Auth: a})
}

func (e *ocEnv) get(c *http.Client, u string, accept string) (int, http.Header, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// authorize calls /connect, follows the browser to the provider, and stops
// at the callback, returning its URL.
func (e *ocEnv) authorize(connector, query string) *url.URL {
	e.t.Helper()
	c := e.browser(false)
	code, h, body := e.get(c, e.URL+"/v1/connectors/"+connector+"/connect?"+query, "")
	if code != http.StatusFound {
		e.t.Fatalf("connect: %d %s", code, body)
	}
	code, h, body = e.get(c, h.Get("Location"), "")
	if code != http.StatusFound {
		e.t.Fatalf("authorization endpoint: %d %s", code, body)
	}
	loc, err := url.Parse(h.Get("Location"))
	if err != nil {
		e.t.Fatal(err)
	}
	return loc
}

func (e *ocEnv) callAPI(tok string) int {
	req, _ := http.NewRequest(http.MethodGet, e.as.APIURL()+"/me", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestOAuthConnectFlowWithPKCE(t *testing.T) {
	e := newOCEnv(t, oauthtest.Options{ClientAuth: "basic"})
	e.createOAuthConnector("crm", client.ConnectorGrantAuthorizationCode, func(a *client.ConnectorAuth) {
		basic := client.ConnectorClientAuthBasic
		a.ClientAuth = &basic
	})

	// The whole flow with a client that follows every redirect: /connect
	// -> provider (approves the test user) -> /v1/oauth/callback -> app.
	code, _, body := e.get(e.browser(true), e.URL+"/v1/connectors/crm/connect?connection=alice&redirect="+url.QueryEscape(e.app.URL+"/done"), "text/html")
	if code != 200 || body != "app: connection=alice&connector=crm" {
		t.Fatalf("flow ended with %d %q", code, body)
	}
	p := e.as.AuthorizeParams()[0]
	if p["code_challenge_method"][0] != "S256" || len(p["code_challenge"][0]) != 43 || p["audience"][0] != "https://api.example" ||
		p["redirect_uri"][0] != e.URL+"/v1/oauth/callback" || p["scope"][0] != "read write" {
		t.Errorf("authorization request: %v", p)
	}
	if f := e.as.LastTokenForm(); f["code_verifier"] == nil || f["(basic)"] == nil || f["redirect_uri"][0] != e.URL+"/v1/oauth/callback" {
		t.Errorf("code exchange: %v", f)
	}
	tok, err := e.Server.OAuthConnections().Token(context.Background(), "crm", "alice")
	if err != nil || e.callAPI(tok) != 200 {
		t.Fatalf("the connected token does not work: %v", err)
	}
	if n := e.as.TokenRequests("authorization_code"); n != 1 {
		t.Errorf("%d code exchanges", n)
	}

	// The connector shows its OAuth settings, never the secret.
	res, err := e.client().GetConnectorWithResponse(context.Background(), "crm")
	if err != nil || res.JSON200 == nil {
		t.Fatal(err)
	}
	a := res.JSON200.Auth
	if a.ClientAuth == nil || *a.ClientAuth != "basic" || a.RedirectUrls == nil || (*a.RedirectUrls)[0] != e.app.URL+"/done" ||
		(*a.AuthorizationParams)["audience"] != "https://api.example" || a.ClientSecret != nil {
		t.Errorf("connector auth as shown: %+v", a)
	}
}

func TestOAuthCallbackWithoutRedirect(t *testing.T) {
	e := newOCEnv(t, oauthtest.Options{})
	e.createOAuthConnector("crm", client.ConnectorGrantAuthorizationCode, nil)
	for _, tc := range []struct {
		name, accept, want string
	}{
		{"api caller gets JSON", "application/json", `"status":"active"`},
		{"browser gets a page", "text/html,application/xhtml+xml,*/*;q=0.8", "<h1>Connected</h1>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cb := e.authorize("crm", "connection="+strings.ReplaceAll(strings.Fields(tc.name)[0], " ", ""))
			code, h, body := e.get(e.browser(false), cb.String(), tc.accept)
			if code != 200 || !strings.Contains(body, tc.want) {
				t.Fatalf("callback: %d %s", code, body)
			}
			if h.Get("Cache-Control") != "no-store" || h.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("callback headers: %v", h)
			}
			if strings.Contains(tc.accept, "json") {
				var got client.OAuthConnected
				if err := json.Unmarshal([]byte(body), &got); err != nil || got.Status != client.OAuthConnectionActive ||
					got.ExpiresAt == nil || got.LastRefreshedAt == nil || got.Scopes == nil || strings.Join(*got.Scopes, " ") != "read write" {
					t.Errorf("callback JSON: %s (%v)", body, err)
				}
			}
		})
	}
}

func TestOAuthCallbackRefusals(t *testing.T) {
	e := newOCEnv(t, oauthtest.Options{})
	e.createOAuthConnector("crm", client.ConnectorGrantAuthorizationCode, nil)
	c := e.browser(false)
	const html = "text/html"

	t.Run("replayed state", func(t *testing.T) {
		cb := e.authorize("crm", "connection=replay")
		if code, _, body := e.get(c, cb.String(), ""); code != 200 {
			t.Fatalf("first callback: %d %s", code, body)
		}
		code, _, body := e.get(c, cb.String(), "")
		if code != 400 || !strings.Contains(body, `"code":"invalid_request"`) || !strings.Contains(body, "already used state") {
			t.Fatalf("replay (JSON): %d %s", code, body)
		}
		code, h, body := e.get(c, cb.String(), html)
		if code != 400 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(body, "<h1>Connection failed</h1>") ||
			!strings.Contains(body, "already used state") {
			t.Fatalf("replay (browser): %d %s %s", code, h.Get("Content-Type"), body)
		}
		if n := e.as.TokenRequests("authorization_code"); n != 1 {
			t.Errorf("a replayed state exchanged a code again (%d exchanges)", n)
		}
	})
	t.Run("wrong verifier", func(t *testing.T) {
		// Substitute the challenge on the way to the provider: the code is
		// then bound to another verifier and the exchange must fail.
		before := e.as.TokenRequests("authorization_code")
		code, h, body := e.get(c, e.URL+"/v1/connectors/crm/connect?connection=mitm", "")
		if code != 302 {
			t.Fatalf("connect: %d %s", code, body)
		}
		authz, _ := url.Parse(h.Get("Location"))
		q := authz.Query()
		q.Set("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
		authz.RawQuery = q.Encode()
		_, h, _ = e.get(c, authz.String(), "")
		code, _, body = e.get(c, h.Get("Location"), "")
		if code != 502 || !strings.Contains(body, "invalid_grant") || !strings.Contains(body, "nothing was stored") {
			t.Fatalf("mismatched verifier: %d %s", code, body)
		}
		if e.as.TokenRequests("authorization_code") != before+1 {
			t.Error("the exchange did not reach the provider")
		}
		if _, err := e.Server.OAuthConnections().Token(context.Background(), "crm", "mitm"); err == nil || !strings.Contains(err.Error(), "pending") {
			t.Errorf("a refused exchange left usable tokens: %v", err)
		}
	})
	t.Run("denied consent", func(t *testing.T) {
		e.as.Deny(true)
		defer e.as.Deny(false)
		cb := e.authorize("crm", "connection=denied")
		code, _, body := e.get(c, cb.String(), html)
		if code != 403 || !strings.Contains(body, "<h1>Consent denied</h1>") || !strings.Contains(body, "nothing was stored") {
			t.Fatalf("denied (browser): %d %s", code, body)
		}
	})
	t.Run("forged state", func(t *testing.T) {
		code, _, body := e.get(c, e.URL+"/v1/oauth/callback?code=abc&state=forged", "")
		if code != 400 || !strings.Contains(body, "unknown or already used state") {
			t.Fatalf("forged: %d %s", code, body)
		}
	})
	t.Run("connect refusals", func(t *testing.T) {
		e.createOAuthConnector("machine", client.ConnectorGrantClientCredentials, nil)
		createConnector(t, e.client(), weatherConnector("weather"))
		readOnly := e.keyWith(auth.ScopeConnectorsRead)
		for _, tc := range []struct {
			name, path string
			key        string
			want       int
			says       string
		}{
			{"redirect not listed", "/v1/connectors/crm/connect?redirect=" + url.QueryEscape("https://evil.example/"), "", 400, "redirect list"},
			{"client credentials connector", "/v1/connectors/machine/connect", "", 400, "client_credentials"},
			{"not oauth2", "/v1/connectors/weather/connect", "", 400, "not oauth2"},
			{"unknown connector", "/v1/connectors/nope/connect", "", 404, "not found"},
			{"bad connection name", "/v1/connectors/crm/connect?connection=Bad%20Name", "", 422, "connection"},
			{"read scope is not enough", "/v1/connectors/crm/connect", readOnly, 403, "connectors:write"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cl := c
				if tc.key != "" {
					cl = e.browser(false, servertest.WithKey(tc.key), servertest.AllowInvalidRequests())
				} else if tc.want == 422 {
					cl = e.browser(false, servertest.AllowInvalidRequests())
				}
				code, _, body := e.get(cl, e.URL+tc.path, "")
				if code != tc.want || !strings.Contains(body, tc.says) {
					t.Fatalf("%s: %d %s", tc.path, code, body)
				}
			})
		}
	})
}

func (e *ocEnv) keyWith(scopes ...string) string {
	e.t.Helper()
	_, key, err := e.Server.Keys().Create(context.Background(), auth.NewAPIKeyInput{Name: "scoped", Scopes: scopes})
	if err != nil {
		e.t.Fatal(err)
	}
	return key
}

func TestOAuthPublicURL(t *testing.T) {
	e := newOCEnv(t, oauthtest.Options{}, func(c *config.Config) { c.PublicURL = "https://switchboard.example.com/" })
	e.createOAuthConnector("crm", client.ConnectorGrantAuthorizationCode, nil)
	code, h, body := e.get(e.browser(false), e.URL+"/v1/connectors/crm/connect", "")
	if code != 302 {
		t.Fatalf("connect: %d %s", code, body)
	}
	u, _ := url.Parse(h.Get("Location"))
	if got := u.Query().Get("redirect_uri"); got != "https://switchboard.example.com/v1/oauth/callback" {
		t.Fatalf("redirect_uri = %q", got)
	}
	if h.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control = %q", h.Get("Cache-Control"))
	}
}

func TestOAuthConnectorExtrasValidated(t *testing.T) {
	e := newOCEnv(t, oauthtest.Options{})
	for _, tc := range []struct {
		name   string
		mutate func(*client.ConnectorAuth)
		field  string
	}{
		{"reserved authorization param", func(a *client.ConnectorAuth) {
			a.AuthorizationParams = &map[string]string{"state": "x"}
		}, "auth.authorizationParams.state"},
		{"reserved token param", func(a *client.ConnectorAuth) { a.TokenParams = &map[string]string{"client_secret": "x"} }, "auth.tokenParams.client_secret"},
		{"relative redirect", func(a *client.ConnectorAuth) { a.RedirectUrls = &[]string{"/done"} }, "auth.redirectUrls[0]"},
		{"duplicate redirect", func(a *client.ConnectorAuth) { a.RedirectUrls = &[]string{"https://a.example/", "https://a.example/"} }, "auth.redirectUrls[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			grant := client.ConnectorGrantAuthorizationCode
			a := client.ConnectorAuth{Type: client.ConnectorAuthOAuth2, Grant: &grant, AuthorizationUrl: connStr(e.as.AuthorizeURL()),
				TokenUrl: connStr(e.as.TokenURL()), ClientId: connStr("id")}
			tc.mutate(&a)
			res, err := e.client().CreateConnectorWithResponse(context.Background(), client.ConnectorInput{Name: connStr("bad"), BaseUrl: e.as.APIURL(), Auth: a})
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode() != 422 || !strings.Contains(string(res.Body), `"field":"`+tc.field+`"`) {
				t.Fatalf("%d %s", res.StatusCode(), res.Body)
			}
		})
	}
	t.Run("extras refused for apiKey", func(t *testing.T) {
		in := weatherConnector("w")
		body := client.ConnectorAuthClientAuth("body")
		in.Auth.ClientAuth = &body
		res, err := e.client().CreateConnectorWithResponse(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != 422 || !strings.Contains(string(res.Body), "auth.clientAuth") {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
	})
}

func TestOAuthConnectorDeleteForgetsConnections(t *testing.T) {
	e := newOCEnv(t, oauthtest.Options{})
	e.createOAuthConnector("crm", client.ConnectorGrantAuthorizationCode, nil)
	cb := e.authorize("crm", "connection=gone")
	res, err := e.client().DeleteConnectorWithResponse(context.Background(), "crm", nil)
	if err != nil || res.StatusCode() != 204 {
		t.Fatalf("delete: %v %d", err, res.StatusCode())
	}
	// The pending authorization died with the connector, even if a
	// connector of the same name comes back.
	e.createOAuthConnector("crm", client.ConnectorGrantAuthorizationCode, nil)
	code, _, body := e.get(e.browser(false), cb.String(), "")
	if code != 400 || !strings.Contains(body, "unknown or already used state") {
		t.Fatalf("callback after delete: %d %s", code, body)
	}
}

// addMeAction adds action "me" (GET /me on the provider's API) to a connector.
func (e *ocEnv) addMeAction(connector string) {
	e.t.Helper()
	createAction(e.t, e.client(), connector, client.ActionInput{Name: connStr("me"), Method: client.ActionMethodGET, Path: "/me"})
}

// run invokes connector.me through POST /v1/integrations/{connector}/run.
func (e *ocEnv) run(c *client.ClientWithResponses, connector, connection string) *client.RunActionResponse {
	e.t.Helper()
	res, err := c.RunActionWithResponse(context.Background(), connector, client.RunRequest{Action: "me", Connection: &connection})
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func (e *ocEnv) connection(connector, name string) *client.Connection {
	e.t.Helper()
	res, err := e.client().GetConnectionWithResponse(context.Background(), connector, name)
	if err != nil || res.JSON200 == nil {
		e.t.Fatalf("get connection: %v %s", err, res.Body)
	}
	return res.JSON200
}

// connectBrowser runs the whole authorization-code flow for a connection.
func (e *ocEnv) connectBrowser(connector, connection string) {
	e.t.Helper()
	code, _, body := e.get(e.browser(true), e.URL+"/v1/connectors/"+connector+"/connect?connection="+connection, "application/json")
	if code != 200 || !strings.Contains(body, `"status":"active"`) {
		e.t.Fatalf("connect %s: %d %s", connection, code, body)
	}
}

func TestOAuthInvokeConcurrentRefreshAndRotation(t *testing.T) {
	// Tokens of the code exchange live 1 s; refreshed ones an hour.
	e := newOCEnv(t, oauthtest.Options{CodeTokenTTL: time.Second})
	e.createOAuthConnector("crm", client.ConnectorGrantAuthorizationCode, nil)
	e.addMeAction("crm")

	// Before the callback the connection exists, pending.
	code, _, _ := e.get(e.browser(false), e.URL+"/v1/connectors/crm/connect?connection=team", "")
	if code != 302 {
		t.Fatalf("connect: %d", code)
	}
	if c := e.connection("crm", "team"); c.Status != client.Pending || c.AuthType != client.Oauth2 {
		t.Fatalf("before the callback: %+v", c)
	}
	if res := e.run(e.client(), "crm", "team"); res.StatusCode() != 409 || !strings.Contains(string(res.Body), "pending") {
		t.Fatalf("invoke a pending connection: %d %s", res.StatusCode(), res.Body)
	}

	e.connectBrowser("crm", "team")
	first := e.connection("crm", "team")
	if first.Status != client.Active || first.ExpiresAt == nil || first.LastRefreshedAt == nil ||
		first.Scopes == nil || strings.Join(*first.Scopes, " ") != "read write" {
		t.Fatalf("after the callback: %+v", first)
	}
	time.Sleep(time.Until(*first.ExpiresAt) + 100*time.Millisecond) // the access token is now expired

	c := e.client()
	var wg sync.WaitGroup
	statuses := make([]int, 100)
	for i := range statuses {
		wg.Go(func() { statuses[i] = e.run(c, "crm", "team").StatusCode() })
	}
	wg.Wait()
	for i, s := range statuses {
		if s != 200 {
			t.Fatalf("invocation %d answered %d", i, s)
		}
	}
	if n := e.as.TokenRequests("refresh_token"); n != 1 {
		t.Fatalf("100 concurrent invocations on an expired token caused %d refresh requests, want 1", n)
	}
	after := e.connection("crm", "team")
	if !after.LastRefreshedAt.After(*first.LastRefreshedAt) || time.Until(*after.ExpiresAt) < 50*time.Minute {
		t.Errorf("after the refresh: %+v", after)
	}

	// The provider revokes the current access token: the upstream's 401
	// causes one refresh, with the rotated refresh token, and one retry.
	tok, err := e.Server.OAuthConnections().Token(context.Background(), "crm", "team")
	if err != nil {
		t.Fatal(err)
	}
	e.as.RevokeAccess(tok)
	if res := e.run(c, "crm", "team"); res.StatusCode() != 200 {
		t.Fatalf("invoke after the access token was revoked: %d %s", res.StatusCode(), res.Body)
	}
	if n := e.as.TokenRequests("refresh_token"); n != 2 {
		t.Errorf("%d refresh requests in all, want 2", n)
	}
	if _, unauthorized := e.as.APICalls(); unauthorized != 1 {
		t.Errorf("the upstream refused %d calls, want 1", unauthorized)
	}
}

func TestOAuthInvokeRevokedRefreshToken(t *testing.T) {
	e := newOCEnv(t, oauthtest.Options{})
	e.createOAuthConnector("crm", client.ConnectorGrantAuthorizationCode, nil)
	e.addMeAction("crm")
	e.connectBrowser("crm", "default")
	if res := e.run(e.client(), "crm", "default"); res.StatusCode() != 200 {
		t.Fatalf("invoke: %d %s", res.StatusCode(), res.Body)
	}

	// The user revokes the app at the provider: access and refresh token.
	tok, _ := e.Server.OAuthConnections().Token(context.Background(), "crm", "default")
	var refresh string
	for _, s := range e.as.Secrets() { // the refresh token issued with tok
		if s != tok && s != e.as.ClientSecret && e.as.IsRefresh(s) {
			refresh = s
		}
	}
	if refresh == "" {
		t.Fatal("no live refresh token found")
	}
	e.as.RevokeRefresh(refresh)
	e.as.RevokeAccess(tok)

	res := e.run(e.client(), "crm", "default")
	if res.StatusCode() != 409 || res.JSON409 == nil {
		t.Fatalf("invoke with a revoked grant: %d %s", res.StatusCode(), res.Body)
	}
	msg := res.JSON409.Error.Message
	if !strings.Contains(msg, `connection "default" of connector "crm" needs to be authorized again`) ||
		!strings.Contains(msg, "GET /v1/connectors/crm/connect?connection=default") {
		t.Errorf("error message: %s", msg)
	}
	if c := e.connection("crm", "default"); c.Status != client.ReauthRequired || c.ExpiresAt != nil {
		t.Errorf("connection after invalid_grant: %+v", c)
	}
	typ := client.EventTypeConnectionReauthRequired
	ev, err := e.client().ListEventsWithResponse(context.Background(), &client.ListEventsParams{Type: &typ})
	if err != nil || ev.JSON200 == nil || len(ev.JSON200.Data) != 1 {
		t.Fatalf("events: %v %s", err, ev.Body)
	}
	if d := ev.JSON200.Data[0].Data; d["connector"] != "crm" || d["name"] != "default" || d["status"] != "reauth_required" {
		t.Errorf("event data: %v", d)
	}
	// Later invocations fail at once; connecting again repairs it.
	refreshes := e.as.TokenRequests("refresh_token")
	if res := e.run(e.client(), "crm", "default"); res.StatusCode() != 409 || e.as.TokenRequests("refresh_token") != refreshes {
		t.Fatalf("second invoke: %d, %d refreshes", res.StatusCode(), e.as.TokenRequests("refresh_token")-refreshes)
	}
	e.connectBrowser("crm", "default")
	if res := e.run(e.client(), "crm", "default"); res.StatusCode() != 200 {
		t.Fatalf("invoke after reconnecting: %d %s", res.StatusCode(), res.Body)
	}
}

func TestOAuthInvokeClientCredentials(t *testing.T) {
	e := newOCEnv(t, oauthtest.Options{ClientAuth: "body"})
	e.createOAuthConnector("machine", client.ConnectorGrantClientCredentials, func(a *client.ConnectorAuth) {
		body := client.ConnectorClientAuthBody
		a.ClientAuth = &body
		a.TokenParams = &map[string]string{"audience": "https://api.example"}
	})
	e.addMeAction("machine")
	c := e.client()
	for i := range 20 {
		if res := e.run(c, "machine", "default"); res.StatusCode() != 200 {
			t.Fatalf("invocation %d: %d %s", i, res.StatusCode(), res.Body)
		}
	}
	if n := e.as.TokenRequests("client_credentials"); n != 1 {
		t.Fatalf("20 invocations fetched %d tokens, want 1 (cached)", n)
	}
	if f := e.as.LastTokenForm(); f["audience"][0] != "https://api.example" || f["client_secret"] == nil {
		t.Errorf("token request: %v", f)
	}
	if conn := e.connection("machine", "default"); conn.Status != client.Active || conn.ExpiresAt == nil {
		t.Errorf("client-credentials connection: %+v", conn)
	}
	tok, _ := e.Server.OAuthConnections().Token(context.Background(), "machine", "default")
	e.as.RevokeAccess(tok)
	if res := e.run(c, "machine", "default"); res.StatusCode() != 200 {
		t.Fatalf("invoke after revocation: %d %s", res.StatusCode(), res.Body)
	}
	if n := e.as.TokenRequests("client_credentials"); n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
}

func TestOAuthTokenEndpointBehindEgressGuard(t *testing.T) {
	// Without 127.0.0.0/8 in egress.allow, the token endpoint on loopback
	// is refused like any upstream.
	// (The baseUrl is a name that does not resolve: a loopback baseUrl
	// would be refused when the connector is saved.)
	e := newOCEnv(t, oauthtest.Options{}, func(c *config.Config) { c.Egress.Allow = nil })
	grant := client.ConnectorGrantClientCredentials
	createConnector(t, e.client(), client.ConnectorInput{Name: connStr("machine"), BaseUrl: "https://api.invalid", Auth: client.ConnectorAuth{
		Type: client.ConnectorAuthOAuth2, Grant: &grant,
		TokenUrl: connStr(e.as.TokenURL()), ClientId: connStr(e.as.ClientID), ClientSecret: connStr(e.as.ClientSecret),
	}})
	e.addMeAction("machine")
	res := e.run(e.client(), "machine", "default")
	if res.StatusCode() != 403 || !strings.Contains(string(res.Body), `"code":"egress_denied"`) || !strings.Contains(string(res.Body), "client-credentials token") {
		t.Fatalf("token request to loopback: %d %s", res.StatusCode(), res.Body)
	}
	if n := e.as.TokenRequests("client_credentials"); n != 0 {
		t.Errorf("the guard let %d token requests through", n)
	}
}
