package browser_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// testConsole: the operator signs in with the admin key, runs an action
// from a connector's try-it form, retries a failed webhook delivery,
// sees a usage chart and signs out; a key without connectors:read sees a
// readable refusal.
func testConsole(t *testing.T, b *tab) {
	e := newEnv(t)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("X-API-Key") != goodKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		id := strings.TrimPrefix(r.URL.Path, "/items/")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "name": "Item " + id, "internal": "dropped by the transformation"})
	})
	e.call("POST", "/v1/connectors", map[string]any{
		"name": "crm", "displayName": "Acme CRM", "baseUrl": up.URL,
		"auth": map[string]any{"type": "apiKey", "name": "X-API-Key", "in": "header"},
	}, http.StatusCreated)
	e.call("POST", "/v1/connectors/crm/actions", map[string]any{
		"name": "lookup", "description": "Look an item up.", "method": "GET", "path": "/items/{{params.id}}",
		"parameters":     map[string]any{"id": map[string]any{"type": "string", "required": true, "in": "path", "description": "The item's id."}},
		"transformation": "return {id: data.id, name: data.name};",
	}, http.StatusCreated)
	e.call("POST", "/v1/connectors/crm/connections", map[string]any{"name": "default", "apiKey": goodKey}, http.StatusCreated)

	// A webhook whose receiver fails until told otherwise, with one failed
	// delivery (the retry schedule here gives up after one retry).
	var receiverOK atomic.Bool
	var received atomic.Int32
	receiver := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		if !receiverOK.Load() {
			http.Error(w, "receiver down", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	wh := e.call("POST", "/v1/webhooks", map[string]any{"url": receiver.URL + "/hooks", "events": []string{"connector.deleted"}, "description": "billing hooks"}, http.StatusCreated)
	whID := wh["id"].(string)
	d := e.call("POST", "/v1/webhooks/"+whID+"/test", nil, http.StatusAccepted)
	deliveryID := d["id"].(string)
	poll(t, "the test delivery fails", func() bool {
		return e.call("GET", "/v1/webhooks/"+whID+"/deliveries/"+deliveryID, nil, http.StatusOK)["status"] == "failed"
	})
	receiverOK.Store(true)

	// Usage: embeddings with the built-in model, recorded for the admin key
	// (the usage report includes what is not flushed yet).
	for i := range 3 {
		e.call("POST", "/v1/embeddings", map[string]any{"model": "local/hash-embed-384", "text": fmt.Sprintf("usage for the chart, call %d", i)}, http.StatusOK)
	}

	res, err := http.Get(e.URL + "/console")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	checkPageHeaders(t, res)

	signIn := func(t *testing.T, b *tab, key string) {
		t.Helper()
		b.navigate("open the console", chromedp.Navigate(e.URL+"/console"))
		b.do("wait for the sign-in form", chromedp.WaitVisible(chromedp.CSS(`main[data-page="signin"] #key`)))
		r := b.navigate("sign in",
			chromedp.SendKeys(chromedp.CSS("#key"), key),
			chromedp.Click(chromedp.CSS(`main[data-page="signin"] button[type="submit"]`)))
		if r.Status != http.StatusOK || !strings.HasSuffix(r.URL, "/console") {
			t.Fatalf("sign-in: HTTP %d at %s", r.Status, r.URL)
		}
		b.do("wait for the console", chromedp.WaitVisible(chromedp.CSS(`#app nav.sidenav`)))
	}

	var cookie *network.Cookie
	t.Run("sign in", func(t *testing.T) {
		b, e := b.in(t), e.in(t)
		b.navigate("open the console", chromedp.Navigate(e.URL+"/console"))
		b.do("wait for the sign-in form", chromedp.WaitVisible(chromedp.CSS(`main[data-page="signin"] #key`)))
		b.shot("sign-in")
		signIn(t, b, e.AdminKey)
		for _, c := range b.cookies(e.URL) {
			if c.Name == "sb_console" {
				cookie = c
			}
		}
		if cookie == nil {
			t.Fatal("no sb_console cookie after sign-in")
		}
		if !cookie.HTTPOnly || cookie.SameSite != network.CookieSameSiteStrict || cookie.Path != "/" || cookie.Session || cookie.Expires <= float64(time.Now().Unix()) {
			t.Errorf("sb_console cookie: httpOnly %v, sameSite %q, path %q, session %v, expires %v; want HttpOnly, SameSite=Strict, path /, an expiry ahead",
				cookie.HTTPOnly, cookie.SameSite, cookie.Path, cookie.Session, cookie.Expires)
		}
		if strings.Contains(b.html(), e.AdminKey) {
			t.Error("the console's HTML contains the API key it was signed in with")
		}
		// The sign-out button is legible on the header (WCAG contrast of its
		// text on the header's background).
		if ratio := get(b, "measure the sign-out button's contrast", chromedp.Evaluate[float64](contrastJS)); ratio < 4.5 {
			t.Errorf("the sign-out button's text has a contrast of %.1f:1 on the header, want at least 4.5:1", ratio)
		}
		if v := get(b, "read document.cookie", chromedp.Evaluate[string](`document.cookie`)); strings.Contains(v, "sb_console") {
			t.Errorf("the page's script can read the session cookie: %q", v)
		}
	})
	if cookie == nil {
		t.FailNow()
	}

	t.Run("run an action", func(t *testing.T) {
		b := b.in(t)
		b.do("wait for the connectors", chromedp.WaitVisible(chromedp.CSS(`[data-view="connectors"] tr[data-connector="crm"]`)))
		b.shot("connectors")
		form := `[data-view="connector"] article[data-action="lookup"] form.try-it`
		b.do("open the connector",
			chromedp.Click(chromedp.CSS(`tr[data-connector="crm"] a`)),
			chromedp.WaitVisible(chromedp.CSS(form+` input[name="id"]`)))
		card := b.text(`article[data-action="lookup"]`)
		for _, want := range []string{"Look an item up.", "/items/{{params.id}}", "The item's id.", "return {id: data.id, name: data.name};"} {
			if !strings.Contains(card, want) {
				t.Errorf("the action's card does not show %q:\n%s", want, card)
			}
		}
		b.do("run the action",
			chromedp.SendKeys(chromedp.CSS(form+` input[name="id"]`), "A-17"),
			chromedp.Click(chromedp.CSS(form+` button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS(form+` .run-result`)))
		out := b.text(form + ` .run-result`)
		if n := get(b, "find the result", chromedp.Evaluate[int](`document.querySelectorAll('article[data-action="lookup"] .run-result.ok').length`)); n != 1 {
			t.Fatalf("the run did not succeed; the form shows:\n%s", out)
		}
		for _, want := range []string{"Upstream status", "200", `"name": "Item A-17"`} {
			if !strings.Contains(out, want) {
				t.Errorf("the run's result does not show %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "dropped by the transformation") {
			t.Errorf("the result is not the transformed one:\n%s", out)
		}
		// The console's cards fill their list (web.css's .card, the connect
		// page's centred box, must not shape them).
		if ratio := get(b, "measure the action's card", chromedp.Evaluate[float64](
			`(() => { const c = document.querySelector('article[data-action="lookup"]'); return c.getBoundingClientRect().width / c.parentElement.getBoundingClientRect().width; })()`)); ratio < 0.95 {
			t.Errorf("the action's card is %.0f%% as wide as its list, want all of it", ratio*100)
		}
		b.shot("try-it-result")
	})

	t.Run("retry a failed delivery", func(t *testing.T) {
		b, e := b.in(t), e.in(t)
		row := fmt.Sprintf(`tr[data-delivery=%q]`, deliveryID)
		b.do("open the webhook", chromedp.Navigate(e.URL+"/console#/webhooks/"+whID),
			chromedp.WaitVisible(chromedp.CSS(row+`.status-row-failed button.retry`)))
		if s := b.text(row); !strings.Contains(s, "500") {
			t.Errorf("the failed delivery's row does not show the receiver's 500:\n%s", s)
		}
		b.shot("delivery-failed")
		before := received.Load()
		b.do("retry", chromedp.Click(chromedp.CSS(row+` button.retry`)))
		// The page re-reads the retried delivery until it is done.
		b.do("wait for the delivery to succeed", chromedp.WaitVisible(chromedp.CSS(row+`.status-row-succeeded`)))
		if received.Load() <= before {
			t.Error("the receiver saw no request after the retry")
		}
		if s := b.text(row); !strings.Contains(s, "succeeded") || !strings.Contains(s, "204") {
			t.Errorf("the retried delivery's row does not show it succeeded with 204:\n%s", s)
		}
		b.shot("delivery-retried")
	})

	t.Run("usage chart", func(t *testing.T) {
		b, e := b.in(t), e.in(t)
		b.do("open usage", chromedp.Navigate(e.URL+"/console#/usage"),
			chromedp.WaitVisible(chromedp.CSS(`[data-view="usage"] svg.usage-chart rect.bar`)))
		series := get(b, "read the chart's series", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('svg.usage-chart rect.bar')].map(r => r.getAttribute('data-series'))`))
		if len(series) == 0 || series[0] != "local/hash-embed-384" {
			t.Errorf("the chart's bars are for %v, want local/hash-embed-384", series)
		}
		if s := b.text(`[data-view="usage"] .totals`); !strings.Contains(s, "3") {
			t.Errorf("the totals do not show 3 requests:\n%s", s)
		}
		b.shot("usage-chart")
	})

	t.Run("sign out", func(t *testing.T) {
		b, e := b.in(t), e.in(t)
		b.navigate("sign out", chromedp.Click(chromedp.CSS(`form[action="/console/sign-out"] button`)))
		b.do("wait for the sign-in form", chromedp.WaitVisible(chromedp.CSS(`main[data-page="signin"] #key`)))
		for _, c := range b.cookies(e.URL) {
			if c.Name == "sb_console" {
				t.Errorf("the sb_console cookie is still set after sign-out: %+v", c)
			}
		}
		req, _ := http.NewRequest(http.MethodGet, e.URL+"/v1/connectors", nil)
		req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("an API call with the signed-out session's cookie: %d, want 401: %s", res.StatusCode, body)
		}
		b.shot("signed-out")
	})

	t.Run("a key without connectors:read", func(t *testing.T) {
		b, e := b.in(t), e.in(t)
		k := e.call("POST", "/v1/api-keys", map[string]any{"name": "llm-only", "scopes": []string{"llm"}}, http.StatusCreated)
		signIn(t, b, k["key"].(string))
		b.do("open connectors", chromedp.Navigate(e.URL+"/console#/connectors"),
			chromedp.WaitVisible(chromedp.CSS(`[data-view="connectors"] .error`)))
		msg := b.text(`[data-view="connectors"] .error`)
		for _, want := range []string{"Not allowed", "connectors:read", "Your key's scopes: llm"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the refusal does not say %q; it reads:\n%s", want, msg)
			}
		}
		b.shot("forbidden")
	})
}

// contrastJS is the WCAG contrast ratio of the sign-out button's text on
// the console header's background.
const contrastJS = `(() => {
  const rgb = (s) => s.match(/[\d.]+/g).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const header = document.querySelector('body > header');
  const button = header.querySelector('form[action="/console/sign-out"] button');
  const fg = lum(rgb(getComputedStyle(button).color));
  const bg = lum(rgb(getComputedStyle(header).backgroundColor));
  return (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
})()`
