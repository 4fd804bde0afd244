package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connect"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn/oauthtest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

const goodKey = "sk-good-connect-key"

// connectEnv is a server with an apiKey connector whose connect page
// checks keys with a test action against an upstream that accepts only
// goodKey, an application to return to, and a browser-like client.
type connectEnv struct {
	*ienv
	app     *httptest.Server
	browser *http.Client
}

func newConnectEnv(t *testing.T) *connectEnv {
	t.Helper()
	e := &connectEnv{ienv: newIEnv(t)}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != goodKey {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid api key"}`)
			return
		}
		_, _ = io.WriteString(w, `{"user":"ada"}`)
	})
	e.app = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "app") }))
	t.Cleanup(e.app.Close)
	e.connector(connectors.Connector{
		Name: "crm", DisplayName: "Acme CRM", BaseURL: up.URL,
		Auth:        connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-API-Key", In: connectors.InHeader, RedirectURLs: []string{e.app.URL + "/done"}},
		ConnectPage: &connectors.ConnectPage{HelpText: "Find your key under Settings → API.", TestAction: "me"},
	}, getAction("me", "/me", nil))
	e.connector(connectors.Connector{Name: "open", BaseURL: up.URL, Auth: connectors.Auth{Type: connectors.AuthNone}}, getAction("me", "/me", nil))
	e.browser = e.HTTPClient(t)
	e.browser.Jar, _ = cookiejar.New(nil)
	e.browser.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return e
}

func (e *connectEnv) session(t *testing.T, in client.ConnectSessionInput) *client.ConnectSessionCreated {
	t.Helper()
	res, err := e.admin.CreateConnectSessionWithResponse(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "create connect session", res.StatusCode(), http.StatusCreated, res.Body)
	return res.JSON201
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// open loads a page and returns its body and CSRF token.
func (e *connectEnv) open(t *testing.T, u string, want int) (string, string) {
	t.Helper()
	res, err := e.browser.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body := string(readAll(t, res))
	if res.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %s", u, res.StatusCode, want, body)
	}
	assertPageHeaders(t, res)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		return body, ""
	}
	return body, m[1]
}

func (e *connectEnv) post(t *testing.T, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	res, err := e.browser.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(readAll(t, res))
}

// assertPageHeaders checks the security headers every page carries.
func assertPageHeaders(t *testing.T, res *http.Response) {
	t.Helper()
	h := res.Header
	for name, want := range map[string]string{
		"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	csp := h.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, d)
		}
	}
}

// TestContractConnectSession_APIKey: the end user enters a wrong key (the
// test action refuses it, nothing is stored), then the right one; the
// browser returns to the application, the connection works, and the link
// is used up.
func TestContractConnectSession_APIKey(t *testing.T) {
	e := newConnectEnv(t)
	ctx := context.Background()
	s := e.session(t, client.ConnectSessionInput{Connector: "crm", Connection: ptr("acct_42"), RedirectUrl: ptr(e.app.URL + "/done")})
	if !strings.HasPrefix(s.Url, e.URL+"/connect/sbcs_") || s.Connection != "acct_42" || time.Until(s.ExpiresAt) < 29*time.Minute {
		t.Fatalf("session %+v", s)
	}

	page, csrf := e.open(t, s.Url, http.StatusOK)
	for _, want := range []string{"Connect your Acme CRM account", "X-API-Key header", "Find your key under Settings → API.", `name="apiKey"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("page lacks %q:\n%s", want, page)
		}
	}

	t.Run("without the CSRF token the form is refused", func(t *testing.T) {
		lax := e.HTTPClient(t, servertest.AllowInvalidRequests())
		lax.Jar = e.browser.Jar
		res, err := lax.PostForm(s.Url, url.Values{"apiKey": {goodKey}})
		if err != nil {
			t.Fatal(err)
		}
		body := string(readAll(t, res))
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
	})
	t.Run("a key the test action refuses is not stored", func(t *testing.T) {
		res, body := e.post(t, s.Url, url.Values{"csrf": {csrf}, "apiKey": {"sk-wrong-key"}})
		if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Acme CRM did not accept these credentials") || !strings.Contains(body, "401") {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		if strings.Contains(body, "sk-wrong-key") {
			t.Fatal("the page shows the key entered")
		}
		if res, _ := e.admin.GetConnectionWithResponse(ctx, "crm", "acct_42"); res.StatusCode() != http.StatusNotFound {
			t.Fatalf("connection stored after a failed check: %d", res.StatusCode())
		}
	})
	t.Run("an empty key names the field", func(t *testing.T) {
		res, body := e.post(t, s.Url, url.Values{"csrf": {csrf}})
		if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "apiKey") || !strings.Contains(body, "is required") {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
	})
	t.Run("the right key connects and returns to the application", func(t *testing.T) {
		res, body := e.post(t, s.Url, url.Values{"csrf": {csrf}, "apiKey": {goodKey}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		loc, _ := url.Parse(res.Header.Get("Location"))
		q := loc.Query()
		if loc.Scheme+"://"+loc.Host+loc.Path != e.app.URL+"/done" || q.Get("connector") != "crm" || q.Get("connection") != "acct_42" || q.Get("status") != "connected" {
			t.Fatalf("Location %s", loc)
		}
		run, err := e.admin.RunActionWithResponse(ctx, "crm", client.RunRequest{Action: "me", Connection: ptr("acct_42")})
		if err != nil || run.StatusCode() != http.StatusOK || !strings.Contains(string(run.Body), "ada") {
			t.Fatalf("run: %v %s", err, run.Body)
		}
		got, err := e.admin.GetConnectSessionWithResponse(ctx, s.Id)
		if err != nil || got.JSON200 == nil || got.JSON200.Status != client.ConnectSessionCompleted || got.JSON200.CompletedAt == nil {
			t.Fatalf("session after: %v %s", err, got.Body)
		}
		if strings.Contains(string(got.Body), s.Url) {
			t.Fatal("GET shows the session's url")
		}
	})
	t.Run("reused", func(t *testing.T) {
		body, _ := e.open(t, s.Url, http.StatusGone)
		if !strings.Contains(body, "already used") {
			t.Fatalf("page: %s", body)
		}
		res, _ := e.post(t, s.Url, url.Values{"csrf": {csrf}, "apiKey": {goodKey}})
		if res.StatusCode != http.StatusGone {
			t.Fatalf("post on a used session: %d", res.StatusCode)
		}
	})
	t.Run("a second session replaces the credentials: connection.updated", func(t *testing.T) {
		s2 := e.session(t, client.ConnectSessionInput{Connector: "crm", Connection: ptr("acct_42")})
		_, csrf := e.open(t, s2.Url, http.StatusOK)
		res, body := e.post(t, s2.Url, url.Values{"csrf": {csrf}, "apiKey": {goodKey}})
		if res.StatusCode != http.StatusOK || !strings.Contains(body, "Your account is connected") {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		created := toolsetEvents(t, e.admin, client.EventTypeConnectionCreated)
		updated := toolsetEvents(t, e.admin, client.EventTypeConnectionUpdated)
		if len(created) != 1 || len(updated) != 1 || updated[0]["name"] != "acct_42" || updated[0]["version"] != float64(2) {
			t.Fatalf("created %v, updated %v", created, updated)
		}
	})
}

// TestContractConnectSession_Refusals: what a backend can get wrong when
// it creates a session, and links that no longer work.
func TestContractConnectSession_Refusals(t *testing.T) {
	e := newConnectEnv(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		in     client.ConnectSessionInput
		status int
		want   string
	}{
		{"unknown connector", client.ConnectSessionInput{Connector: "nope"}, 404, "nope"},
		{"connector without credentials", client.ConnectSessionInput{Connector: "open"}, 422, "uses auth type none"},
		{"redirect not listed", client.ConnectSessionInput{Connector: "crm", RedirectUrl: ptr("https://evil.example/steal")}, 422, "redirectUrl"},
		{"redirect on another path", client.ConnectSessionInput{Connector: "crm", RedirectUrl: ptr(e.app.URL + "/done/../other")}, 422, "auth.redirectUrls"},
		{"bad connection name", client.ConnectSessionInput{Connector: "crm", Connection: ptr("Not A Name")}, 422, "connection"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.admin.CreateConnectSessionWithResponse(ctx, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode() != tt.status || !strings.Contains(string(res.Body), tt.want) {
				t.Fatalf("%d %s, want %d naming %q", res.StatusCode(), res.Body, tt.status, tt.want)
			}
		})
	}
	t.Run("expiresIn out of range", func(t *testing.T) {
		c := e.HTTPClient(t, servertest.WithKey(e.AdminKey), servertest.AllowInvalidRequests())
		res, err := c.Post(e.URL+"/v1/connect-sessions", "application/json", strings.NewReader(`{"connector":"crm","expiresIn":5}`))
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, res)
		if res.StatusCode != 422 || !strings.Contains(string(body), "expiresIn") {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
	})
	t.Run("a key without connectors:write", func(t *testing.T) {
		_, key, err := e.Server.Keys().Create(ctx, auth.NewAPIKeyInput{Name: "reader", Scopes: []string{auth.ScopeConnectorsRead, auth.ScopeInvoke}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.ClientWithKey(t, key).CreateConnectSessionWithResponse(ctx, client.ConnectSessionInput{Connector: "crm"})
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != http.StatusForbidden || !strings.Contains(string(res.Body), "connectors:write") {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
	})
	t.Run("unknown link", func(t *testing.T) {
		body, _ := e.open(t, e.URL+"/connect/sbcs_not-a-real-token", http.StatusNotFound)
		if !strings.Contains(body, "not valid") {
			t.Fatalf("page: %s", body)
		}
	})
	t.Run("expired link", func(t *testing.T) {
		past := *e.Server.ConnectSessions()
		past.Now = func() time.Time { return time.Now().Add(-time.Hour) }
		c, err := past.Create(ctx, connect.CreateInput{Connector: "crm", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := e.open(t, e.URL+connect.PagePath(c.Token), http.StatusGone)
		if !strings.Contains(body, "expired") {
			t.Fatalf("page: %s", body)
		}
		got, err := e.admin.GetConnectSessionWithResponse(ctx, c.ID)
		if err != nil || got.JSON200 == nil || got.JSON200.Status != client.ConnectSessionExpired {
			t.Fatalf("%v %s", err, got.Body)
		}
	})
	t.Run("the wrong connector's form: an apiKey session cannot authorize", func(t *testing.T) {
		s := e.session(t, client.ConnectSessionInput{Connector: "crm"})
		_, csrf := e.open(t, s.Url, http.StatusOK)
		res, body := e.post(t, s.Url+"/authorize", url.Values{"csrf": {csrf}})
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "enter the credentials in the form") {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
	})
	t.Run("unknown session id", func(t *testing.T) {
		res, err := e.admin.GetConnectSessionWithResponse(ctx, "cs_nope")
		if err != nil || res.StatusCode() != http.StatusNotFound {
			t.Fatalf("%v %d", err, res.StatusCode())
		}
	})
}

// TestContractConnectSession_OAuth: the page's button starts the PKCE
// flow against a real authorization server; the callback returns to the
// page, which completes the session and returns to the application. A
// denied consent comes back as an error page, the session still open.
func TestContractConnectSession_OAuth(t *testing.T) {
	e := newConnectEnv(t)
	ctx := context.Background()
	as := oauthtest.New(t, oauthtest.Options{})
	e.connector(connectors.Connector{Name: "drive", DisplayName: "Drive", BaseURL: as.APIURL(), Auth: connectors.Auth{
		Type: connectors.AuthOAuth2, Grant: connectors.GrantAuthorizationCode, AuthorizationURL: as.AuthorizeURL(), TokenURL: as.TokenURL(),
		ClientID: as.ClientID, ClientSecret: as.ClientSecret, Scopes: []string{"read"}, RedirectURLs: []string{e.app.URL + "/done"},
	}}, getAction("me", "/me", nil))
	s := e.session(t, client.ConnectSessionInput{Connector: "drive", RedirectUrl: ptr(e.app.URL + "/done")})

	page, csrf := e.open(t, s.Url, http.StatusOK)
	if !strings.Contains(page, "Connect with Drive") || !strings.Contains(page, "/authorize") {
		t.Fatalf("page: %s", page)
	}
	// follow walks redirects from res to this server's return page and on.
	follow := func(t *testing.T, res *http.Response) *http.Response {
		t.Helper()
		for i := 0; i < 10 && res.StatusCode/100 == 3; i++ {
			loc, err := res.Request.URL.Parse(res.Header.Get("Location"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(loc.String(), e.app.URL) {
				return res
			}
			if res, err = e.browser.Get(loc.String()); err != nil {
				t.Fatal(err)
			}
			_ = readAll(t, res)
		}
		return res
	}
	t.Run("connect before authorizing is refused", func(t *testing.T) {
		res, err := e.browser.Get(e.URL + connect.ReturnPath(s.Id) + "?outcome=connected")
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, res)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "has not been authorized") {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
	})
	t.Run("denied consent", func(t *testing.T) {
		as.Deny(true)
		defer as.Deny(false)
		res, _ := e.post(t, s.Url+"/authorize", url.Values{"csrf": {csrf}})
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), as.AuthorizeURL()) {
			t.Fatalf("authorize: %d %s", res.StatusCode, res.Header.Get("Location"))
		}
		last := follow(t, res)
		if last.Request.URL.Path != connect.ReturnPath(s.Id) || last.StatusCode != http.StatusOK {
			t.Fatalf("ended at %s (%d)", last.Request.URL, last.StatusCode)
		}
	})
	t.Run("consent connects and returns to the application", func(t *testing.T) {
		res, _ := e.post(t, s.Url+"/authorize", url.Values{"csrf": {csrf}})
		last := follow(t, res)
		loc, _ := url.Parse(last.Header.Get("Location"))
		if last.StatusCode != http.StatusSeeOther || loc.Query().Get("status") != "connected" || loc.Query().Get("connector") != "drive" {
			t.Fatalf("ended at %s (%d) → %s", last.Request.URL, last.StatusCode, loc)
		}
		c, err := e.admin.GetConnectionWithResponse(ctx, "drive", "default")
		if err != nil || c.JSON200 == nil || c.JSON200.Status != client.Active {
			t.Fatalf("connection: %v %s", err, c.Body)
		}
		if got, _ := e.admin.GetConnectSessionWithResponse(ctx, s.Id); got.JSON200 == nil || got.JSON200.Status != client.ConnectSessionCompleted {
			t.Fatalf("session: %s", got.Body)
		}
	})
}

// TestContractConsole: sign-in with a key, the console's API calls on
// the session cookie (writes need the CSRF header), sign-out.
func TestContractConsole(t *testing.T) {
	e := newConnectEnv(t)
	b := e.browser
	page, csrf := e.open(t, e.URL+"/console", http.StatusOK)
	if !strings.Contains(page, `action="/console/sign-in"`) {
		t.Fatalf("sign-in page: %s", page)
	}
	t.Run("a wrong key", func(t *testing.T) {
		res, body := e.post(t, e.URL+"/console/sign-in", url.Values{"csrf": {csrf}, "key": {"sb_wrong"}})
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not valid") || strings.Contains(body, "sb_wrong") {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
	})
	res, body := e.post(t, e.URL+"/console/sign-in", url.Values{"csrf": {csrf}, "key": {e.AdminKey}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console" {
		t.Fatalf("sign in: %d %s", res.StatusCode, body)
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "sb_console" {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.Expires.IsZero() || strings.Contains(cookie.Value, e.AdminKey) {
		t.Fatalf("cookie %+v", cookie)
	}
	shell, _ := e.open(t, e.URL+"/console", http.StatusOK)
	m := regexp.MustCompile(`name="csrf-token" content="([^"]+)"`).FindStringSubmatch(shell)
	if m == nil || !strings.Contains(shell, `src="/static/console.js"`) || strings.Contains(shell, e.AdminKey) {
		t.Fatalf("console shell: %s", shell)
	}
	token := m[1]
	call := func(method, path, body, csrf string) (int, string) {
		req, _ := http.NewRequest(method, e.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		res, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, string(readAll(t, res))
	}
	if st, body := call("GET", "/v1/connectors", "", ""); st != 200 || !strings.Contains(body, `"crm"`) {
		t.Fatalf("read with the cookie: %d %s", st, body)
	}
	if st, body := call("POST", "/v1/connect-sessions", `{"connector":"crm"}`, ""); st != 403 || !strings.Contains(body, "X-CSRF-Token") {
		t.Fatalf("write without the header: %d %s", st, body)
	}
	if st, body := call("POST", "/v1/connect-sessions", `{"connector":"crm"}`, token); st != 201 {
		t.Fatalf("write with the header: %d %s", st, body)
	}
	for _, f := range []string{"console.js", "console.css", "web.css"} {
		res, err := b.Get(e.URL + "/static/" + f)
		if err != nil {
			t.Fatal(err)
		}
		_ = readAll(t, res)
		if res.StatusCode != 200 || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s: %d %v", f, res.StatusCode, res.Header)
		}
	}
	if res, err := b.Get(e.URL + "/static/nope.js"); err != nil || res.StatusCode != 404 {
		t.Fatalf("unknown static file: %v", err)
	}
	res, body = e.post(t, e.URL+"/console/sign-out", url.Values{"csrf": {token}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d %s", res.StatusCode, body)
	}
	// The old cookie no longer works, even sent again by hand.
	req, _ := http.NewRequest("GET", e.URL+"/v1/connectors", nil)
	req.AddCookie(cookie)
	res, err := e.HTTPClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != 401 || !strings.Contains(string(body), "sign in again") {
		t.Fatalf("after sign-out: %d %s", res.StatusCode, body)
	}
}
