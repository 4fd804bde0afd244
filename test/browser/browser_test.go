package browser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// TestBrowser runs every scenario in one headless chromium, each in a
// browser context of its own (its own cookies) against a server of its own.
func TestBrowser(t *testing.T) {
	browserCtx := startBrowser(t)
	shots := screenshotDir(t)
	for _, sc := range []struct {
		name string
		run  func(t *testing.T, b *tab)
	}{
		{"ConnectSession_APIKey_WrongThenRightKey", testConnectAPIKey},
		{"ConnectSession_OAuth_ConsentAndDenial", testConnectOAuth},
		{"Console_SignInRunRetryUsageSignOut", testConsole},
	} {
		t.Run(sc.name, func(t *testing.T) {
			sc.run(t, newTab(t, browserCtx, shots, sc.name))
		})
	}
}

// browserNames are the binaries looked up in PATH, in this order.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome"}

// findBrowser returns the path of a Chromium binary; without one the test
// fails (a browser test that did not run must never pass in CI).
func findBrowser(t *testing.T) string {
	t.Helper()
	for _, name := range browserNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("no browser for the browser tests: none of %s is in PATH. Install Debian's chromium (apt-get install chromium) or run .ci/run, which installs it", strings.Join(browserNames, ", "))
	return ""
}

// startBrowser starts headless chromium for the duration of t and returns
// a context holding it.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(findBrowser(t)),
		chromedp.Flag("headless", "new"),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1280, 900),
	)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	// The first Do starts the browser; its context must have no deadline
	// (the browser lives as long as it). A start that hangs fails the
	// test through the allocator's own timeout.
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start the browser: %v", err)
	}
	return browserCtx
}

// screenshotDir is $SWITCHBOARD_SCREENSHOTS, else artifacts/screenshots at
// the repository's root.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SWITCHBOARD_SCREENSHOTS")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		root := wd
		for {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(root)
			if parent == root {
				t.Fatalf("no go.mod above %s: set SWITCHBOARD_SCREENSHOTS", wd)
			}
			root = parent
		}
		dir = filepath.Join(root, "artifacts", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wait bounds every browser step: generous, for a loaded CI machine.
const wait = 60 * time.Second

// tab is one browser tab in a browser context of its own.
type tab struct {
	t      *testing.T
	ctx    context.Context
	dir    string
	prefix string
	n      *int // screenshots taken
}

// in is the tab for subtest t (a failure ends t, not its parent).
func (b *tab) in(t *testing.T) *tab {
	c := *b
	c.t = t
	return &c
}

func newTab(t *testing.T, browserCtx context.Context, dir, name string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	prefix := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(name, "-"))
	// This run's screenshots only (a FAILED one from an earlier run would mislead).
	old, _ := filepath.Glob(filepath.Join(dir, prefix+"-*.png"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	return &tab{t: t, ctx: ctx, dir: dir, prefix: prefix, n: new(int)}
}

// do runs steps within wait; a failure fails the test with a screenshot
// and what the page showed.
func (b *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, wait)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail(what, err)
	}
}

// get runs one action with a value within wait.
func get[T any](b *tab, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, wait)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fail(what, err)
	}
	return v
}

// navigate runs steps that lead to a page load (a click on a submit
// button, a navigation) and returns the final response, after redirects.
func (b *tab) navigate(what string, steps ...chromedp.Action[chromedp.Void]) *network.Response {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, wait)
	defer cancel()
	res, err := chromedp.RunResponse(ctx, steps...)
	if err != nil {
		b.fail(what, err)
	}
	return res
}

// location is the page's URL.
func (b *tab) location() *url.URL {
	b.t.Helper()
	u, err := url.Parse(get(b, "read the location", chromedp.Location()))
	if err != nil {
		b.t.Fatal(err)
	}
	return u
}

// text is the visible text of the first element matching css.
func (b *tab) text(css string) string {
	b.t.Helper()
	return get(b, "read the text of "+css, chromedp.Text(chromedp.CSS(css)))
}

// waitText polls until the visible text of css contains want.
func (b *tab) waitText(css, want string) string {
	b.t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.innerText : ""; })()`, css)
	var last string
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		cancel()
		if err == nil {
			last = s
			if strings.Contains(s, want) {
				return s
			}
		}
		if time.Now().After(deadline) {
			b.fail(fmt.Sprintf("wait for %q in %s", want, css), fmt.Errorf("not there after %s; the element reads %q", wait, last))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// html is the document's markup.
func (b *tab) html() string {
	b.t.Helper()
	return get(b, "read the page's HTML", chromedp.Evaluate[string](`document.documentElement.outerHTML`))
}

// shot saves a screenshot of the whole page as <prefix>-NN-<name>.png.
func (b *tab) shot(name string) {
	b.t.Helper()
	*b.n++
	b.save(fmt.Sprintf("%02d-%s", *b.n, name))
}

func (b *tab) save(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, wait)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.dir, b.prefix+"-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	b.t.Logf("screenshot %s", path)
}

// fail ends the test at a failed step, with a screenshot and the page's
// URL and text.
func (b *tab) fail(what string, err error) {
	b.t.Helper()
	b.save("FAILED")
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	b.t.Fatalf("%s: %v\npage %s reads:\n%s", what, err, loc, body)
}

// cookies are the browser's cookies for u.
func (b *tab) cookies(u string) []*network.Cookie {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, wait)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{u}})
	if err != nil {
		b.fail("read the cookies", err)
	}
	return res.Cookies
}

// env is a server for one scenario, and its admin API.
type env struct {
	*servertest.Env
	t     *testing.T
	admin *http.Client
}

// in is the env for subtest t.
func (e *env) in(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// newEnv starts a server whose egress guard lets connectors reach
// loopback (the upstreams here) and whose failed webhook deliveries give
// up after one quick retry.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := servertest.New(t, func(c *config.Config) {
		c.Egress.Allow = []string{"127.0.0.0/8"}
		c.Webhooks.RetrySchedule = []config.Duration{config.Duration(50 * time.Millisecond)}
	})
	return &env{Env: e, t: t, admin: e.HTTPClient(t, servertest.WithKey(e.AdminKey))}
}

// call sends a JSON request with the admin key and decodes the answer,
// failing the test unless its status is want.
func (e *env) call(method, path string, body any, want int) map[string]any {
	e.t.Helper()
	return e.callWith(e.admin, method, path, body, want)
}

func (e *env) callWith(c *http.Client, method, path string, body any, want int) map[string]any {
	e.t.Helper()
	code, out := e.send(c, method, path, body)
	if code != want {
		e.t.Fatalf("%s %s: %d, want %d: %v", method, path, code, want, out)
	}
	return out
}

// send sends a JSON request with c and decodes the answer.
func (e *env) send(c *http.Client, method, path string, body any) (int, map[string]any) {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	out := map[string]any{}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			e.t.Fatalf("%s %s: %d: %v: %s", method, path, res.StatusCode, err, b)
		}
	}
	return res.StatusCode, out
}

// poll checks every 50 ms until check is true, failing after wait.
func poll(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newApp is the application a connect session returns to: it shows the
// query it was given.
func newApp(t *testing.T) *httptest.Server {
	t.Helper()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><title>Application</title><h1>Back in the application</h1><pre id=query>%s</pre>",
			strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(r.URL.Query().Encode()))
	}))
	t.Cleanup(app.Close)
	return app
}

// checkPageHeaders checks the security headers every page carries.
func checkPageHeaders(t *testing.T, res *http.Response) {
	t.Helper()
	for name, want := range map[string]string{
		"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
	} {
		if got := res.Header.Get(name); got != want {
			t.Errorf("%s %s: header %s is %q, want %q", res.Request.Method, res.Request.URL.Path, name, got, want)
		}
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("%s %s: Content-Security-Policy %q lacks %q", res.Request.Method, res.Request.URL.Path, csp, d)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("Content-Security-Policy %q allows inline or eval'd script", csp)
	}
}

// newUpstream is an HTTP server on 127.0.0.1 (an upstream API, a webhook
// receiver) for the duration of t.
func newUpstream(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
