package oauthconn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn/oauthtest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store/storetest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// recorder records events in the caller's transaction, like the webhooks
// outbox does.
type recorder struct{}

func (recorder) Record(tx store.Tx, typ string, data any) error {
	seq, err := tx.NextSequence("events")
	if err != nil {
		return err
	}
	return store.PutJSON(tx, "events", fmt.Sprintf("%020d", seq), map[string]any{"type": typ, "data": data})
}

var _ events.Recorder = recorder{}

// clock is the Managers' clock; tests move it forward to expire tokens.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

type env struct {
	t      testing.TB
	clock  *clock
	st     store.Store
	vault  *vault.Vault
	as     *oauthtest.Server
	client oauthconn.Client
	logs   *syncBuffer
	cb     *httptest.Server
	app    *httptest.Server
	errs   []string // every error message seen
	mu     sync.Mutex
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// openStore is the store the "processes" (Managers) of a test share (bbolt
// here; the one place to point these tests at PostgreSQL).
func openStore(t testing.TB) store.Store { return storetest.Shared(t) }

func newEnv(t testing.TB, o oauthtest.Options, grant string) *env {
	t.Helper()
	st := openStore(t)
	v, err := vault.New(vault.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	as := oauthtest.New(t, o)
	e := &env{t: t, st: st, vault: v, as: as, logs: &syncBuffer{}, clock: &clock{}}
	e.app = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "app got %s", r.URL.RawQuery)
	}))
	t.Cleanup(e.app.Close)
	e.client = oauthconn.Client{
		Connector: "crm", Grant: grant,
		AuthorizationURL: as.AuthorizeURL(), TokenURL: as.TokenURL(),
		ClientID: as.ClientID, ClientSecret: as.ClientSecret,
		Scopes: []string{"read", "write"}, ClientAuth: o.ClientAuth,
		AuthParams:   map[string]string{"audience": "https://api.example"},
		TokenParams:  map[string]string{"resource": "https://api.example"},
		RedirectURLs: []string{e.app.URL + "/done"},
	}
	t.Cleanup(e.checkNoLeaks)
	return e
}

// manager returns a Manager over the env's store (each call: a new
// "process" sharing the database).
func (e *env) manager(hooks oauthconn.Hooks) *oauthconn.Manager {
	return oauthconn.New(oauthconn.Options{
		Store: e.st, Vault: e.vault, Events: recorder{},
		Lookup: func(tx store.Tx, connector string) (oauthconn.Client, error) {
			if connector != e.client.Connector {
				return oauthconn.Client{}, errs.E(errs.NotFound, "no connector %q", connector)
			}
			return e.client, nil
		},
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Hooks:  hooks,
		Now:    e.clock.Now,
	})
}

func (e *env) noteErr(err error) {
	if err != nil {
		e.mu.Lock()
		e.errs = append(e.errs, err.Error(), fmt.Sprint(err.(interface{ Error() string })))
		var ee *errs.Error
		if errors.As(err, &ee) {
			b, _ := json.Marshal(ee.Details)
			e.errs = append(e.errs, string(b))
		}
		e.mu.Unlock()
	}
}

// checkNoLeaks asserts that no token, code or client secret appears in
// the logs or in any error.
func (e *env) checkNoLeaks() {
	e.mu.Lock()
	all := e.logs.String() + "\n" + strings.Join(e.errs, "\n")
	e.mu.Unlock()
	for _, s := range e.as.Secrets() {
		if s != "" && strings.Contains(all, s) {
			e.t.Errorf("a secret issued by the authorization server leaked into logs or errors")
		}
	}
}

// callbackServer serves the callback with m.Complete, the way the real
// /v1/oauth/callback does.
func (e *env) callbackServer(m *oauthconn.Manager) string {
	if e.cb == nil {
		e.cb = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			res, err := m.Complete(r.Context(), oauthconn.CallbackInput{State: q.Get("state"), Code: q.Get("code"),
				Error: q.Get("error"), ErrorDescription: q.Get("error_description")})
			if err != nil {
				e.noteErr(err)
				http.Error(w, string(errs.KindOf(err))+": "+err.Error(), errs.KindOf(err).Status())
				return
			}
			if res.Redirect != "" {
				http.Redirect(w, r, res.Redirect+"?connection="+res.Connection, http.StatusFound)
				return
			}
			fmt.Fprint(w, "connected")
		}))
		e.t.Cleanup(e.cb.Close)
	}
	return e.cb.URL + "/callback"
}

// connect runs the authorization-code flow with a client that follows
// redirects and returns the final response body and status.
func (e *env) connect(m *oauthconn.Manager, connection string) (int, string) {
	e.t.Helper()
	b, err := m.Begin(context.Background(), oauthconn.BeginInput{Connector: "crm", Connection: connection,
		Redirect: e.client.RedirectURLs[0], CallbackURL: e.callbackServer(m)})
	if err != nil {
		e.t.Fatalf("Begin: %v", err)
	}
	res, err := http.Get(b.AuthorizationURL)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

func (e *env) stored(connection string) (gen uint64, refresh string, status *oauthconn.Status) {
	e.t.Helper()
	err := e.st.View(context.Background(), func(tx store.Tx) error {
		var rec struct {
			Generation uint64 `json:"generation"`
		}
		if err := store.GetJSON(tx, oauthconn.TokensBucket, "crm/"+connection, &rec); err != nil {
			return err
		}
		gen = rec.Generation
		b, err := e.vault.Get(tx, oauthconn.SecretRef("crm", connection))
		if err != nil {
			return err
		}
		var s struct {
			RefreshToken string `json:"refreshToken"`
		}
		if b != nil {
			_ = json.Unmarshal(b, &s)
		}
		refresh = s.RefreshToken
		status, err = oauthconn.New(oauthconn.Options{Store: e.st, Vault: e.vault}).Status(tx, "crm", connection)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return gen, refresh, status
}

// invoke does what the invocation engine does: get a token, call the API,
// on 401 refresh once and retry once.
func (e *env) invoke(m *oauthconn.Manager, connection string) (int, error) {
	ctx := context.Background()
	tok, err := m.Token(ctx, "crm", connection)
	if err != nil {
		e.noteErr(err)
		return 0, err
	}
	status := e.callAPI(tok)
	if status == http.StatusUnauthorized {
		if tok, err = m.Refresh(ctx, "crm", connection, tok); err != nil {
			e.noteErr(err)
			return 0, err
		}
		status = e.callAPI(tok)
	}
	return status, nil
}

func (e *env) callAPI(tok string) int {
	req, _ := http.NewRequest(http.MethodGet, e.as.APIURL()+"/me", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestAuthorizationCodeWithPKCE(t *testing.T) {
	e := newEnv(t, oauthtest.Options{ClientAuth: "basic"}, oauthconn.GrantAuthorizationCode)
	var statuses []string
	m := e.manager(oauthconn.Hooks{
		Status: func(_ store.Tx, _, _, status string) error { statuses = append(statuses, status); return nil },
	})
	code, body := e.connect(m, "default")
	if code != 200 || body != "app got connection=default" {
		t.Fatalf("flow ended with %d %q", code, body)
	}
	params := e.as.AuthorizeParams()[0]
	for k, want := range map[string]string{"code_challenge_method": "S256", "audience": "https://api.example",
		"scope": "read write", "response_type": "code", "client_id": e.as.ClientID} {
		if got := params[k]; len(got) != 1 || got[0] != want {
			t.Errorf("authorization request %s = %v, want %q", k, got, want)
		}
	}
	if len(params["code_challenge"]) != 1 || len(params["code_challenge"][0]) != 43 || len(params["state"][0]) < 43 {
		t.Errorf("authorization request lacks a S256 challenge or a strong state: %v", params)
	}
	form := e.as.LastTokenForm()
	if form["grant_type"][0] != "authorization_code" || form["code_verifier"] == nil || form["(basic)"] == nil ||
		form["client_secret"] != nil || form["resource"][0] != "https://api.example" {
		t.Errorf("code exchange form = %v", form)
	}
	gen, refresh, st := e.stored("default")
	if gen != 1 || refresh == "" || st.Status != oauthconn.StatusActive || st.ExpiresAt == nil || st.LastRefreshedAt == nil ||
		strings.Join(st.Scopes, " ") != "read write" {
		t.Fatalf("after connect: gen %d, status %+v", gen, st)
	}
	if strings.Join(statuses, ",") != "pending,active" {
		t.Errorf("status hook saw %v, want pending then active", statuses)
	}
	if status, err := e.invoke(m, "default"); err != nil || status != 200 {
		t.Fatalf("invoke: %d %v", status, err)
	}
	if n := e.as.TokenRequests("refresh_token"); n != 0 {
		t.Errorf("a fresh token was refreshed %d times", n)
	}
}

func TestCallbackRefusals(t *testing.T) {
	e := newEnv(t, oauthtest.Options{}, oauthconn.GrantAuthorizationCode)
	m := e.manager(oauthconn.Hooks{})
	cb := e.callbackServer(m)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	// authorize drives the browser to the provider and stops at the
	// callback, returning its URL.
	authorize := func(t *testing.T, connection string, tamper func(url.Values)) *url.URL {
		t.Helper()
		b, err := m.Begin(context.Background(), oauthconn.BeginInput{Connector: "crm", Connection: connection, CallbackURL: cb})
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(b.AuthorizationURL)
		if tamper != nil {
			q := u.Query()
			tamper(q)
			u.RawQuery = q.Encode()
		}
		res, err := noRedirect.Get(u.String())
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		loc, err := res.Location()
		if err != nil {
			t.Fatalf("authorization endpoint answered %d without Location", res.StatusCode)
		}
		return loc
	}
	get := func(t *testing.T, u string) (int, string) {
		t.Helper()
		res, err := noRedirect.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	t.Run("replayed state", func(t *testing.T) {
		loc := authorize(t, "replay", nil)
		if code, body := get(t, loc.String()); code != 200 {
			t.Fatalf("first callback: %d %s", code, body)
		}
		gen, _, _ := e.stored("replay")
		code, body := get(t, loc.String())
		if code != 400 || !strings.Contains(body, "unknown or already used state") {
			t.Fatalf("replayed callback: %d %s", code, body)
		}
		if gen2, _, _ := e.stored("replay"); gen2 != gen {
			t.Errorf("a replayed callback changed the stored tokens")
		}
	})
	t.Run("wrong verifier", func(t *testing.T) {
		// The challenge the provider sees belongs to another verifier (as
		// when an attacker injects their own authorization): the exchange
		// with the server's verifier must be refused.
		loc := authorize(t, "wrongverifier", func(q url.Values) {
			q.Set("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
		})
		code, body := get(t, loc.String())
		if code != 502 || !strings.Contains(body, "invalid_grant") || !strings.Contains(body, "nothing was stored") {
			t.Fatalf("callback with a mismatched verifier: %d %s", code, body)
		}
		_, refresh, st := e.stored("wrongverifier")
		if refresh != "" || st.Status != oauthconn.StatusPending {
			t.Errorf("a failed exchange stored something: %+v", st)
		}
	})
	t.Run("denied consent", func(t *testing.T) {
		e.as.Deny(true)
		defer e.as.Deny(false)
		loc := authorize(t, "denied", nil)
		if loc.Query().Get("error") != "access_denied" {
			t.Fatalf("provider did not deny: %s", loc)
		}
		code, body := get(t, loc.String())
		if code != 403 || !strings.Contains(body, "consent was denied") {
			t.Fatalf("denied callback: %d %s", code, body)
		}
		if _, refresh, st := e.stored("denied"); refresh != "" || st.Status != oauthconn.StatusPending {
			t.Errorf("denied consent stored something: %+v", st)
		}
	})
	t.Run("forged state", func(t *testing.T) {
		code, body := get(t, cb+"?code=x&state=forged")
		if code != 400 || !strings.Contains(body, "unknown or already used state") {
			t.Fatalf("forged state: %d %s", code, body)
		}
	})
	t.Run("missing state", func(t *testing.T) {
		if code, _ := get(t, cb+"?code=x"); code != 400 {
			t.Fatalf("missing state: %d", code)
		}
	})
	t.Run("redirect not allowed", func(t *testing.T) {
		_, err := m.Begin(context.Background(), oauthconn.BeginInput{Connector: "crm", Connection: "x", Redirect: "https://evil.example/", CallbackURL: cb})
		if errs.KindOf(err) != errs.Invalid || !strings.Contains(err.Error(), "redirect list") {
			t.Fatalf("foreign redirect: %v", err)
		}
	})
}

func TestExpiredState(t *testing.T) {
	e := newEnv(t, oauthtest.Options{}, oauthconn.GrantAuthorizationCode)
	m := e.manager(oauthconn.Hooks{})
	b, err := m.Begin(context.Background(), oauthconn.BeginInput{Connector: "crm", Connection: "late", CallbackURL: e.callbackServer(m)})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(oauthconn.StateTTL + time.Second)
	res, err := http.Get(b.AuthorizationURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(body), "expired") {
		t.Fatalf("late callback: %d %s", res.StatusCode, body)
	}
	if n := e.as.TokenRequests("authorization_code"); n != 0 {
		t.Errorf("an expired state still exchanged its code (%d token requests)", n)
	}
}

func TestRefreshRotation(t *testing.T) {
	e := newEnv(t, oauthtest.Options{ClientAuth: "body"}, oauthconn.GrantAuthorizationCode)
	e.client.ClientAuth = oauthconn.ClientAuthBody
	m := e.manager(oauthconn.Hooks{})
	e.connect(m, "default")
	gen0, refresh0, _ := e.stored("default")
	// 59:30 later the one-hour token expires within the 60 s skew.
	e.clock.Advance(59*time.Minute + 30*time.Second)

	if status, err := e.invoke(m, "default"); err != nil || status != 200 {
		t.Fatalf("invoke: %d %v", status, err)
	}
	gen1, refresh1, st := e.stored("default")
	if e.as.TokenRequests("refresh_token") != 1 || gen1 != gen0+1 || refresh1 == refresh0 || refresh1 == "" {
		t.Fatalf("refresh: %d requests, generation %d->%d, rotated %v", e.as.TokenRequests("refresh_token"), gen0, gen1, refresh1 != refresh0)
	}
	if form := e.as.LastTokenForm(); form["client_secret"] == nil || form["(basic)"] != nil {
		t.Errorf("client authentication is not in the body: %v", form)
	}
	if st.LastRefreshedAt == nil || st.ExpiresAt.Sub(e.clock.Now()) < 50*time.Minute {
		t.Errorf("status after refresh: %+v", st)
	}
	// The refreshed token is good for an hour: no more refreshes.
	for range 5 {
		if status, err := e.invoke(m, "default"); err != nil || status != 200 {
			t.Fatalf("invoke: %d %v", status, err)
		}
	}
	if n := e.as.TokenRequests("refresh_token"); n != 1 {
		t.Errorf("%d refreshes for a fresh token", n)
	}
	// An upstream 401 (the provider revoked the access token) triggers one
	// refresh with the rotated refresh token, and one retry.
	tok, _ := m.Token(context.Background(), "crm", "default")
	e.as.RevokeAccess(tok)
	if status, err := e.invoke(m, "default"); err != nil || status != 200 {
		t.Fatalf("invoke after revoked access token: %d %v", status, err)
	}
	if n := e.as.TokenRequests("refresh_token"); n != 2 {
		t.Errorf("401 caused %d refreshes in all, want 2", n)
	}
	if ok, unauthorized := e.as.APICalls(); unauthorized != 1 || ok != 7 {
		t.Errorf("API calls ok %d, 401 %d", ok, unauthorized)
	}
}

func TestConcurrentRefreshIsOneRequest(t *testing.T) {
	e := newEnv(t, oauthtest.Options{TokenDelay: 50 * time.Millisecond}, oauthconn.GrantAuthorizationCode)
	m := e.manager(oauthconn.Hooks{})
	e.connect(m, "default")
	e.clock.Advance(2 * time.Hour) // expired
	var wg sync.WaitGroup
	fails := make(chan string, 100)
	for range 100 {
		wg.Go(func() {
			if status, err := e.invoke(m, "default"); err != nil || status != 200 {
				fails <- fmt.Sprintf("%d %v", status, err)
			}
		})
	}
	wg.Wait()
	close(fails)
	for f := range fails {
		t.Error("invocation failed:", f)
	}
	if n := e.as.TokenRequests("refresh_token"); n != 1 {
		t.Fatalf("100 concurrent invocations on a due token caused %d refresh requests, want 1", n)
	}
	if gen, _, _ := e.stored("default"); gen != 2 {
		t.Errorf("generation %d after one refresh", gen)
	}
}

func TestSecondProcessWaitsForTheFirstRefresh(t *testing.T) {
	// Two Managers over one database stand for two processes. A finds the
	// token expired and refreshes; while A's request is at the provider, B
	// finds it expired too: B must wait for A's result (the lease in the
	// store) instead of spending the same rotating refresh token.
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	e := newEnv(t, oauthtest.Options{BeforeToken: func(grant string) {
		if grant == "refresh_token" {
			arrived <- struct{}{}
			<-release
		}
	}}, oauthconn.GrantAuthorizationCode)
	a, b := e.manager(oauthconn.Hooks{}), e.manager(oauthconn.Hooks{})
	e.connect(a, "default")
	gen0, _, _ := e.stored("default")
	e.clock.Advance(2 * time.Hour)

	var wg sync.WaitGroup
	toks := make([]string, 2)
	errList := make([]error, 2)
	wg.Go(func() { toks[0], errList[0] = a.Token(context.Background(), "crm", "default") })
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("A did not reach the token endpoint")
	}
	wg.Go(func() { toks[1], errList[1] = b.Token(context.Background(), "crm", "default") })
	// Give B time to find the lease taken; had B sent its own refresh it
	// would be counted below.
	time.Sleep(300 * time.Millisecond)
	close(release)
	wg.Wait()
	for _, err := range errList {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := e.as.TokenRequests("refresh_token"); n != 1 {
		t.Fatalf("two processes sent %d refresh requests, want 1", n)
	}
	gen, _, st := e.stored("default")
	if gen != gen0+1 || st.Status != oauthconn.StatusActive {
		t.Fatalf("generation %d -> %d, status %s", gen0, gen, st.Status)
	}
	if toks[0] != toks[1] || e.callAPI(toks[0]) != 200 {
		t.Errorf("the two processes do not share the refreshed token")
	}
}

func TestStaleWriteLosesToNewerToken(t *testing.T) {
	// When a lease expires mid-request (a stalled process), the late
	// writer finds a newer generation stored and adopts it: it never
	// overwrites a newer token with an older one.
	var once sync.Once
	hold := make(chan struct{})
	arrived := make(chan struct{})
	e := newEnv(t, oauthtest.Options{BeforeToken: func(grant string) {
		if grant == "refresh_token" {
			first := false
			once.Do(func() { first = true })
			if first {
				close(arrived)
				<-hold
			}
		}
	}}, oauthconn.GrantAuthorizationCode)
	a, b := e.manager(oauthconn.Hooks{}), e.manager(oauthconn.Hooks{})
	e.connect(a, "default")
	gen0, _, _ := e.stored("default")
	e.clock.Advance(2 * time.Hour)

	var (
		wg   sync.WaitGroup
		tokA string
		errA error
	)
	wg.Go(func() { tokA, errA = a.Token(context.Background(), "crm", "default") })
	<-arrived
	e.clock.Advance(time.Minute) // A's lease (timeout + 5 s) runs out
	tokB, errB := b.Token(context.Background(), "crm", "default")
	if errB != nil {
		t.Fatal(errB)
	}
	_, refreshB, _ := e.stored("default")
	close(hold)
	wg.Wait()
	// A's refresh token was rotated away by B: A gets invalid_grant and
	// must not mark the connection reauth_required, nor store anything.
	if errA != nil {
		t.Fatalf("A: %v", errA)
	}
	gen, refresh, st := e.stored("default")
	if gen != gen0+1 || refresh != refreshB || st.Status != oauthconn.StatusActive {
		t.Fatalf("generation %d -> %d, refresh kept %v, status %s", gen0, gen, refresh == refreshB, st.Status)
	}
	if tokA != tokB {
		t.Errorf("A did not adopt the newer token")
	}
}

func TestRevokedRefreshTokenRequiresReauth(t *testing.T) {
	e := newEnv(t, oauthtest.Options{}, oauthconn.GrantAuthorizationCode)
	var statuses []string
	m := e.manager(oauthconn.Hooks{
		Status: func(_ store.Tx, _, _, status string) error { statuses = append(statuses, status); return nil },
	})
	e.connect(m, "default")
	_, refresh, _ := e.stored("default")
	e.as.RevokeRefresh(refresh)
	e.clock.Advance(2 * time.Hour)

	_, err := e.invoke(m, "default")
	if errs.KindOf(err) != errs.Conflict || !strings.Contains(err.Error(), `connection "default" of connector "crm" needs to be authorized again`) ||
		!strings.Contains(err.Error(), "/v1/connectors/crm/connect?connection=default") {
		t.Fatalf("invoke with a revoked refresh token: %v", err)
	}
	_, refreshAfter, st := e.stored("default")
	if st.Status != oauthconn.StatusReauthRequired || st.Reason != "invalid_grant" || refreshAfter != "" {
		t.Fatalf("status %+v, tokens kept %v", st, refreshAfter != "")
	}
	if strings.Join(statuses, ",") != "pending,active,reauth_required" {
		t.Errorf("status hook saw %v", statuses)
	}
	// The event is in the store, written by the same transaction.
	var got []map[string]any
	_ = e.st.View(context.Background(), func(tx store.Tx) error {
		return tx.Scan("events", "", "", func(_ string, v []byte) (bool, error) {
			var ev map[string]any
			_ = json.Unmarshal(v, &ev)
			got = append(got, ev)
			return true, nil
		})
	})
	if len(got) != 1 || got[0]["type"] != events.ConnectionReauthRequired {
		t.Fatalf("events: %v", got)
	}
	if d := got[0]["data"].(map[string]any); d["connection"] != "default" || d["status"] != "reauth_required" {
		t.Errorf("event data: %v", d)
	}
	// Later invocations fail at once, without asking the provider.
	before := e.as.TokenRequests("refresh_token")
	if _, err := e.invoke(m, "default"); errs.KindOf(err) != errs.Conflict {
		t.Fatalf("second invoke: %v", err)
	}
	if e.as.TokenRequests("refresh_token") != before {
		t.Error("a reauth_required connection asked the provider again")
	}
	// Connecting again makes it active.
	e.connect(m, "default")
	if status, err := e.invoke(m, "default"); err != nil || status != 200 {
		t.Fatalf("invoke after reconnect: %d %v", status, err)
	}
}

func TestClientCredentialsCached(t *testing.T) {
	tests := []struct {
		name       string
		ttl        time.Duration
		step       time.Duration // clock advance between calls
		calls      int
		wantTokens int
	}{
		{"cached while fresh", time.Hour, 10 * time.Minute, 5, 1},
		{"refetched within the skew of expiry", time.Hour, 59 * time.Minute, 3, 3},
		// A 30 s token is fresh for half its life (15 s), not 30-60 < 0.
		{"short-lived token cached for half its life", 30 * time.Second, 10 * time.Second, 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, oauthtest.Options{ClientTokenTTL: tt.ttl}, oauthconn.GrantClientCredentials)
			m := e.manager(oauthconn.Hooks{})
			for i := range tt.calls {
				if i > 0 {
					e.clock.Advance(tt.step)
				}
				tok, err := m.Token(context.Background(), "crm", "default")
				if err != nil {
					t.Fatal(err)
				}
				e.callAPI(tok)
			}
			if n := e.as.TokenRequests("client_credentials"); n != tt.wantTokens {
				t.Fatalf("%d calls made %d token requests, want %d", tt.calls, n, tt.wantTokens)
			}
			if form := e.as.LastTokenForm(); form["scope"][0] != "read write" || form["resource"][0] != "https://api.example" {
				t.Errorf("client-credentials form: %v", form)
			}
			_, _, st := e.stored("default")
			if st.Status != oauthconn.StatusActive || st.ExpiresAt == nil {
				t.Errorf("status %+v", st)
			}
		})
	}
	t.Run("401 refetches once", func(t *testing.T) {
		e := newEnv(t, oauthtest.Options{}, oauthconn.GrantClientCredentials)
		m := e.manager(oauthconn.Hooks{})
		tok, err := m.Token(context.Background(), "crm", "default")
		if err != nil {
			t.Fatal(err)
		}
		e.as.RevokeAccess(tok)
		if status, err := e.invoke(m, "default"); err != nil || status != 200 {
			t.Fatalf("invoke: %d %v", status, err)
		}
		if n := e.as.TokenRequests("client_credentials"); n != 2 {
			t.Errorf("%d token requests, want 2", n)
		}
	})
	t.Run("wrong client secret", func(t *testing.T) {
		e := newEnv(t, oauthtest.Options{}, oauthconn.GrantClientCredentials)
		e.client.ClientSecret = "cs_not-the-secret-at-all"
		m := e.manager(oauthconn.Hooks{})
		_, err := e.invoke(m, "default")
		if errs.KindOf(err) != errs.Upstream || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "not-the-secret") {
			t.Fatalf("wrong secret: %v", err)
		}
	})
}

func TestTokenEndpointRedirectNotFollowed(t *testing.T) {
	e := newEnv(t, oauthtest.Options{}, oauthconn.GrantClientCredentials)
	moved := httptest.NewServer(http.RedirectHandler(e.as.TokenURL(), http.StatusTemporaryRedirect))
	defer moved.Close()
	e.client.TokenURL = moved.URL
	m := e.manager(oauthconn.Hooks{})
	_, err := m.Token(context.Background(), "crm", "default")
	e.noteErr(err)
	if errs.KindOf(err) != errs.Upstream || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("redirecting token endpoint: %v", err)
	}
	if n := e.as.TokenRequests("client_credentials"); n != 0 {
		t.Errorf("the client credentials followed a redirect (%d requests)", n)
	}
}

func TestPendingConnectionRefused(t *testing.T) {
	e := newEnv(t, oauthtest.Options{}, oauthconn.GrantAuthorizationCode)
	m := e.manager(oauthconn.Hooks{})
	if _, err := m.Begin(context.Background(), oauthconn.BeginInput{Connector: "crm", Connection: "p", CallbackURL: e.callbackServer(m)}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Token(context.Background(), "crm", "p")
	if errs.KindOf(err) != errs.Conflict || !strings.Contains(err.Error(), "pending") {
		t.Fatalf("pending: %v", err)
	}
	_, err = m.Token(context.Background(), "crm", "never")
	if errs.KindOf(err) != errs.NotFound || !strings.Contains(err.Error(), "connect it with GET /v1/connectors/crm/connect?connection=never") {
		t.Fatalf("never connected: %v", err)
	}
}

func TestReplicas_ConcurrentRunsOnAnExpiredTokenRefreshOnce(t *testing.T) {
	// Three Managers over one store stand for three replicas; 50 runs
	// spread over them find the token expired at once.
	const runs = 50
	tests := []struct {
		name string
		// holderDies: the first replica's refresh request never returns
		// (its process died holding the lease); the others take over once
		// the lease expired.
		holderDies bool
		// want is the number of refresh requests the provider sees.
		want int
	}{
		{"every replica alive: one refresh", false, 1},
		{"the lease holder dies: one more refresh, after its lease expired", true, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var first sync.Once
			hung, dead := make(chan struct{}), make(chan struct{})
			e := newEnv(t, oauthtest.Options{TokenDelay: 20 * time.Millisecond, BeforeToken: func(grant string) {
				if grant == "refresh_token" && tc.holderDies {
					isFirst := false
					first.Do(func() { isFirst = true })
					if isFirst {
						close(hung)
						<-dead
					}
				}
			}}, oauthconn.GrantAuthorizationCode)
			ms := []*oauthconn.Manager{e.manager(oauthconn.Hooks{}), e.manager(oauthconn.Hooks{}), e.manager(oauthconn.Hooks{})}
			e.connect(ms[0], "default")
			e.clock.Advance(2 * time.Hour) // expired

			var (
				wg     sync.WaitGroup
				holder sync.WaitGroup
			)
			fails := make(chan string, runs)
			run := func(m *oauthconn.Manager) {
				if status, err := e.invoke(m, "default"); err != nil || status != 200 {
					fails <- fmt.Sprintf("%d %v", status, err)
				}
			}
			live := ms
			if tc.holderDies {
				holder.Go(func() { _, _ = ms[0].Token(context.Background(), "crm", "default") })
				<-hung
				live = ms[1:]
			}
			for i := range runs - len(ms) + len(live) {
				wg.Go(func() { run(live[i%len(live)]) })
			}
			if tc.holderDies {
				e.clock.Advance(time.Minute) // the dead holder's lease (timeout + 5 s) runs out
			}
			wg.Wait()
			close(dead)
			holder.Wait()
			close(fails)
			for f := range fails {
				t.Error("run failed:", f)
			}
			if n := e.as.TokenRequests("refresh_token"); n != tc.want {
				t.Fatalf("%d concurrent runs over %d replicas caused %d refresh requests, want %d", runs, len(ms), n, tc.want)
			}
			if gen, _, st := e.stored("default"); gen != 2 || st.Status != oauthconn.StatusActive {
				t.Errorf("generation %d, status %s after the runs; want 2, active", gen, st.Status)
			}
		})
	}
}
