package browser_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn/oauthtest"
)

const (
	goodKey = "good-key"
	badKey  = "wrong-key-5f3a9c"
)

// testConnectAPIKey: an end user opens an API-key connect session, enters
// a key the test action refuses (a precise error, the field empty, the
// key nowhere in the page), then the right one, and lands back in the
// application; the connection works and the link is used up.
func testConnectAPIKey(t *testing.T, b *tab) {
	e := newEnv(t)
	var upstreamBad atomic.Int32
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("X-API-Key") != goodKey {
			upstreamBad.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid api key"}`)
			return
		}
		_, _ = io.WriteString(w, `{"user":"ada"}`)
	})
	app := newApp(t)
	e.call("POST", "/v1/connectors", map[string]any{
		"name": "crm", "displayName": "Acme CRM", "description": "Customers and deals.", "baseUrl": up.URL,
		"auth":        map[string]any{"type": "apiKey", "name": "X-API-Key", "in": "header", "redirectUrls": []string{app.URL + "/done"}},
		"connectPage": map[string]any{"helpText": "Find your key under Settings → API keys.", "testAction": "me"},
	}, http.StatusCreated)
	e.call("POST", "/v1/connectors/crm/actions", map[string]any{"name": "me", "method": "GET", "path": "/me"}, http.StatusCreated)

	s := e.call("POST", "/v1/connect-sessions", map[string]any{"connector": "crm", "connection": "acct_42", "redirectUrl": app.URL + "/done"}, http.StatusCreated)
	link := s["url"].(string)
	if !strings.HasPrefix(link, e.URL+"/connect/") {
		t.Fatalf("session url %q is not on the server %s", link, e.URL)
	}

	// The page's security headers (a GET does not use the link up).
	res, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", link, res.StatusCode)
	}
	checkPageHeaders(t, res)
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, app.URL) {
		t.Errorf("Content-Security-Policy %q does not let the form lead back to the application %s", csp, app.URL)
	}

	if r := b.navigate("open the connect link", chromedp.Navigate(link)); r.Status != http.StatusOK {
		t.Fatalf("connect page: HTTP %d", r.Status)
	}
	b.do("wait for the form", chromedp.WaitVisible(chromedp.CSS(`main[data-page="connect"] input#apiKey`)))
	page := b.text("main")
	for _, want := range []string{"Connect your Acme CRM account", "Customers and deals.", "the X-API-Key header", "Find your key under Settings → API keys.", "acct_42"} {
		if !strings.Contains(page, want) {
			t.Errorf("the connect page does not say %q; it reads:\n%s", want, page)
		}
	}
	b.shot("form")

	r := b.navigate("submit a wrong key",
		chromedp.SendKeys(chromedp.CSS("#apiKey"), badKey),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)))
	if r.Status != http.StatusUnprocessableEntity {
		t.Errorf("wrong key: HTTP %d, want 422", r.Status)
	}
	msg := b.waitText(".error", "did not accept these credentials")
	for _, want := range []string{`Acme CRM did not accept these credentials`, `action "me"`, "401", "Check them and try again"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q; it reads %q", want, msg)
		}
	}
	if v := get(b, "read the key field", chromedp.Value(chromedp.CSS("#apiKey"))); v != "" {
		t.Errorf("after a refused key the field holds %q, want it empty", v)
	}
	if html := b.html(); strings.Contains(html, badKey) {
		t.Errorf("the page's HTML contains the key entered:\n%s", html)
	}
	if b.location().Path != "/connect/"+strings.TrimPrefix(link, e.URL+"/connect/") {
		t.Errorf("after a refused key the page is %s, want the connect page", b.location())
	}
	if upstreamBad.Load() != 1 {
		t.Errorf("the upstream saw %d refused calls, want 1 (the test action)", upstreamBad.Load())
	}
	e.call("GET", "/v1/connectors/crm/connections/acct_42", nil, http.StatusNotFound)
	b.shot("wrong-key")

	r = b.navigate("submit the right key",
		chromedp.SendKeys(chromedp.CSS("#apiKey"), goodKey),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)))
	if r.Status != http.StatusOK {
		t.Errorf("after the right key: HTTP %d at %s", r.Status, r.URL)
	}
	back := b.location()
	if !strings.HasPrefix(back.String(), app.URL+"/done?") {
		t.Fatalf("after the right key the browser is at %s, want %s/done?...", back, app.URL)
	}
	q := back.Query()
	if q.Get("connector") != "crm" || q.Get("connection") != "acct_42" || q.Get("status") != "connected" {
		t.Errorf("the application got %q, want connector=crm, connection=acct_42, status=connected", back.RawQuery)
	}
	b.do("wait for the application", chromedp.WaitVisible(chromedp.CSS("#query")))
	b.shot("connected")

	conn := e.call("GET", "/v1/connectors/crm/connections/acct_42", nil, http.StatusOK)
	if conn["status"] != "active" || conn["authType"] != "apiKey" {
		t.Errorf("connection %v, want active apiKey", conn)
	}
	run := e.call("POST", "/v1/integrations/crm/run", map[string]any{"action": "me", "connection": "acct_42"}, http.StatusOK)
	if res, _ := run["result"].(map[string]any); run["status"] != float64(200) || res["user"] != "ada" {
		t.Errorf("run me on the new connection: %v", run)
	}

	r = b.navigate("open the used link again", chromedp.Navigate(link))
	if r.Status != http.StatusGone {
		t.Errorf("the used link: HTTP %d, want 410", r.Status)
	}
	if msg := b.text("main"); !strings.Contains(msg, "already used") {
		t.Errorf("the used link's page does not say it was already used:\n%s", msg)
	}
	b.shot("link-used")
}

// testConnectOAuth: an end user connects through OAuth 2.0 (the
// authorization server approves), back through the callback to the
// application; then another user declines consent and is told so.
func testConnectOAuth(t *testing.T, b *tab) {
	e := newEnv(t)
	as := oauthtest.New(t, oauthtest.Options{})
	app := newApp(t)
	e.call("POST", "/v1/connectors", map[string]any{
		"name": "calendar", "displayName": "Acme Calendar", "baseUrl": as.APIURL(),
		"auth": map[string]any{
			"type": "oauth2", "grant": "authorization_code",
			"authorizationUrl": as.AuthorizeURL(), "tokenUrl": as.TokenURL(),
			"clientId": as.ClientID, "clientSecret": as.ClientSecret, "scopes": []string{"read"},
			"redirectUrls": []string{app.URL + "/done"},
		},
	}, http.StatusCreated)
	e.call("POST", "/v1/connectors/calendar/actions", map[string]any{"name": "me", "method": "GET", "path": "/me"}, http.StatusCreated)

	open := func(t *testing.T, b *tab, e *env, connection string) string {
		t.Helper()
		s := e.call("POST", "/v1/connect-sessions", map[string]any{"connector": "calendar", "connection": connection, "redirectUrl": app.URL + "/done"}, http.StatusCreated)
		link := s["url"].(string)
		if r := b.navigate("open the connect link", chromedp.Navigate(link)); r.Status != http.StatusOK {
			t.Fatalf("connect page: HTTP %d", r.Status)
		}
		b.do("wait for the button", chromedp.WaitVisible(chromedp.CSS(`main[data-page="connect"] form[action$="/authorize"] button`)))
		return link
	}

	t.Run("consent", func(t *testing.T) {
		b, e := b.in(t), e.in(t)
		open(t, b, e, "ada")
		if btn := b.text(`form[action$="/authorize"] button`); btn != "Connect with Acme Calendar" {
			t.Errorf("the button reads %q", btn)
		}
		u, _ := url.Parse(as.AuthorizeURL())
		if page := b.text("main"); !strings.Contains(page, "You will sign in at "+u.Host) {
			t.Errorf("the page does not name the provider's host %s:\n%s", u.Host, page)
		}
		b.shot("oauth-button")
		b.navigate("connect with the provider", chromedp.Click(chromedp.CSS(`form[action$="/authorize"] button`)))
		back := b.location()
		q := back.Query()
		if !strings.HasPrefix(back.String(), app.URL+"/done?") || q.Get("connector") != "calendar" || q.Get("connection") != "ada" || q.Get("status") != "connected" {
			t.Fatalf("after the authorization the browser is at %s, want %s/done with connector=calendar, connection=ada, status=connected", back, app.URL)
		}
		b.do("wait for the application", chromedp.WaitVisible(chromedp.CSS("#query")))
		b.shot("oauth-connected")
		if as.TokenRequests("authorization_code") != 1 {
			t.Errorf("the provider saw %d code exchanges, want 1", as.TokenRequests("authorization_code"))
		}
		conn := e.call("GET", "/v1/connectors/calendar/connections/ada", nil, http.StatusOK)
		if conn["status"] != "active" || conn["authType"] != "oauth2" {
			t.Errorf("connection %v, want active oauth2", conn)
		}
		run := e.call("POST", "/v1/integrations/calendar/run", map[string]any{"action": "me", "connection": "ada"}, http.StatusOK)
		if res, _ := run["result"].(map[string]any); res["user"] != oauthtest.User {
			t.Errorf("run me on the new connection: %v", run)
		}
		html := b.html()
		for _, s := range as.Secrets() {
			if strings.Contains(html, s) {
				t.Errorf("the application's page holds a secret of the provider: %q", s)
			}
		}
	})

	t.Run("denied", func(t *testing.T) {
		b, e := b.in(t), e.in(t)
		as.Deny(true)
		defer as.Deny(false)
		link := open(t, b, e, "bob")
		b.navigate("connect with the provider, which is refused", chromedp.Click(chromedp.CSS(`form[action$="/authorize"] button`)))
		b.do("wait for the outcome", chromedp.WaitVisible(chromedp.CSS(`main[data-page="message"]`)))
		page := b.text("main")
		for _, want := range []string{"Not connected", "You declined the authorization at the provider.", "Nothing was stored"} {
			if !strings.Contains(page, want) {
				t.Errorf("the page does not say %q; it reads:\n%s", want, page)
			}
		}
		b.shot("oauth-declined")
		if code, conn := e.send(e.admin, "GET", "/v1/connectors/calendar/connections/bob", nil); code != http.StatusNotFound && conn["status"] == "active" {
			t.Errorf("a declined authorization left an active connection: %v", conn)
		}
		b.navigate("return to the application", chromedp.Click(chromedp.CSS(`main a.button`)))
		back := b.location()
		if q := back.Query(); !strings.HasPrefix(back.String(), app.URL+"/done?") || q.Get("status") != "error" || q.Get("connection") != "bob" {
			t.Errorf("the way back leads to %s, want %s/done with connection=bob, status=error", back, app.URL)
		}
		// The link is still usable: the user may try again.
		as.Deny(false)
		if r := b.navigate("open the link again", chromedp.Navigate(link)); r.Status != http.StatusOK {
			t.Fatalf("the link after a declined authorization: HTTP %d, want 200 (it stays usable)", r.Status)
		}
	})
}
