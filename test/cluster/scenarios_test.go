package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn/oauthtest"
)

// A connector's baseUrl is an IP literal the egress guard allows
// (127.0.0.0/8): a host name would be resolved at every save, and the
// tests make no DNS queries.

// upstream is an HTTP API the connectors call: every path answers its own
// name, so a test sees which action definition a replica used.
func upstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// apiKeyConnector creates connector name (API-key auth) on baseURL with
// action "get" on path, and connection "default" with a secret.
func (c *cluster) apiKeyConnector(r *replica, name, baseURL, path string) {
	c.t.Helper()
	c.mustDo(r, c.admin, http.MethodPost, "/v1/connectors", map[string]any{
		"name": name, "baseUrl": baseURL,
		"auth": map[string]any{"type": "apiKey", "name": "X-API-Key", "in": "header"},
	}, http.StatusCreated)
	c.mustDo(r, c.admin, http.MethodPost, "/v1/connectors/"+name+"/actions", map[string]any{
		"name": "get", "method": "GET", "path": path,
	}, http.StatusCreated)
	c.mustDo(r, c.admin, http.MethodPost, "/v1/connectors/"+name+"/connections", map[string]any{
		"name": "default", "apiKey": "upstream-secret-0123456789",
	}, http.StatusCreated)
}

// within polls check every 10 ms until it is true or bound has passed; it
// returns how long it took and whether it became true.
func within(bound time.Duration, check func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if check() {
			return time.Since(start), true
		}
		if time.Since(start) > bound {
			return time.Since(start), false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCluster_SharedStateAcrossReplicas(t *testing.T) {
	c := newCluster(t, 3)
	r1, r2, r3 := c.replicas[0], c.replicas[1], c.replicas[2]
	up := upstream(t)

	t.Run("WritesThroughOneReplicaAreVisibleOnTheOthers", func(t *testing.T) {
		c.apiKeyConnector(r1, "weather", up.URL, "/forecast")
		for _, r := range []*replica{r2, r3} {
			b := c.mustDo(r, c.admin, http.MethodGet, "/v1/connectors/weather", nil, http.StatusOK)
			if !strings.Contains(string(b), up.URL) {
				t.Errorf("GET /v1/connectors/weather on %s = %s", r.name, b)
			}
			b = c.mustDo(r, c.admin, http.MethodPost, "/v1/integrations/weather/run", map[string]any{"action": "get"}, http.StatusOK)
			if !strings.Contains(string(b), `/forecast`) {
				t.Errorf("run on %s = %s", r.name, b)
			}
		}
	})

	t.Run("RevokedKeyIsRefusedByEveryReplicaWithinOneSecond", func(t *testing.T) {
		id, secret := c.createKey(r1, map[string]any{"name": "revoked-soon", "scopes": []string{"connectors:read"}})
		for _, r := range c.replicas { // every replica has the key in its cache
			c.mustDo(r, secret, http.MethodGet, "/v1/connectors", nil, http.StatusOK)
		}
		c.mustDo(r1, c.admin, http.MethodDelete, "/v1/api-keys/"+id, nil, http.StatusNoContent)
		for _, r := range []*replica{r2, r3} {
			took, ok := within(time.Second, func() bool {
				code, _ := do(r, secret, http.MethodGet, "/v1/connectors", nil)
				return code == http.StatusUnauthorized
			})
			if !ok {
				t.Errorf("%s still accepts the revoked key after %v", r.name, took)
			}
			t.Logf("%s refused the revoked key after %v", r.name, took)
		}
	})

	t.Run("ActionChangeIsUsedByEveryReplicaWithinOneSecond", func(t *testing.T) {
		for _, r := range c.replicas { // warm every replica's action cache
			c.mustDo(r, c.admin, http.MethodPost, "/v1/integrations/weather/run", map[string]any{"action": "get"}, http.StatusOK)
		}
		c.mustDo(r3, c.admin, http.MethodPut, "/v1/connectors/weather/actions/get", map[string]any{
			"name": "get", "method": "GET", "path": "/forecast/v2",
		}, http.StatusOK)
		for _, r := range []*replica{r1, r2} {
			took, ok := within(time.Second, func() bool {
				_, b := do(r, c.admin, http.MethodPost, "/v1/integrations/weather/run", map[string]any{"action": "get"})
				return strings.Contains(string(b), "/forecast/v2")
			})
			if !ok {
				t.Errorf("%s still runs the old action definition after %v", r.name, took)
			}
		}
	})

	t.Run("RequestLimitHoldsAcrossReplicas", func(t *testing.T) {
		const limit = 120
		_, secret := c.createKey(r1, map[string]any{
			"name": "limited", "scopes": []string{"invoke"},
			"rateLimit": map[string]any{"requestsPerMinute": limit},
		})
		var admitted, refused, other atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		const total, workers = 2 * limit, 12
		next := atomic.Int64{}
		for range workers {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= total {
						return
					}
					r := c.replicas[i%3] // round robin
					code, b := do(r, secret, http.MethodPost, "/v1/integrations/weather/run", map[string]any{"action": "get"})
					switch code {
					case http.StatusOK:
						admitted.Add(1)
					case http.StatusTooManyRequests:
						refused.Add(1)
					default:
						other.Add(1)
						t.Errorf("run on %s = %d %s", r.name, code, b)
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		// The bucket refills at limit/60 per second while the test runs.
		refill := float64(limit) * elapsed.Seconds() / 60
		want := float64(limit) + refill
		got := float64(admitted.Load())
		t.Logf("%d requests round robin over 3 replicas in %v: %d admitted (want %.0f: %d + refill %.1f), %d refused",
			total, elapsed.Round(time.Millisecond), admitted.Load(), want, limit, refill, refused.Load())
		if got < float64(limit)*0.95 || got > want*1.05 {
			t.Errorf("a limit of %d requests per minute admitted %d over three replicas (allowed: %d to %.0f)", limit, admitted.Load(), limit*95/100, want*1.05)
		}
	})
}

func TestCluster_KilledReplicaLosesNoAcknowledgedWrite(t *testing.T) {
	c := newCluster(t, 3)
	victim := c.replicas[2]
	const total = 1000
	var once sync.Once
	acked := c.createConnectors("c", total, 48, func(done int) {
		if done == total/3 {
			once.Do(victim.kill) // kill -9 a third of the way in
		}
	})
	once.Do(victim.kill)
	if len(acked) < total/2 {
		t.Fatalf("only %d of %d creates acknowledged", len(acked), total)
	}
	// Every acknowledged connector is there, read through each survivor.
	for _, r := range c.alive() {
		have := c.listConnectors(r)
		var missing []string
		for _, n := range acked {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s lists %d connectors; %d acknowledged creates are missing: %v", r.name, len(have), len(missing), missing[:min(10, len(missing))])
		}
	}
	t.Logf("%d of %d creates acknowledged; %s killed after %d", len(acked), total, victim.name, total/3)
}

// createConnectors creates n connectors named prefix0000… with workers
// concurrent clients, round robin over the replicas, calling after (when
// set) with the number of answers so far after each; it returns the names
// whose creation was acknowledged (201).
func (c *cluster) createConnectors(prefix string, n, workers int, after func(done int)) []string {
	var (
		mu    sync.Mutex
		acked []string
		next  atomic.Int64
		done  atomic.Int64
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				name := fmt.Sprintf("%s%04d", prefix, i)
				code, _ := do(c.replicas[i%len(c.replicas)], c.admin, http.MethodPost, "/v1/connectors", map[string]any{
					"name": name, "baseUrl": "http://127.0.0.1:9",
					"auth": map[string]any{"type": "apiKey", "name": "X-API-Key", "in": "header"},
				})
				if code == http.StatusCreated {
					mu.Lock()
					acked = append(acked, name)
					mu.Unlock()
				}
				if d := done.Add(1); after != nil {
					after(int(d))
				}
			}
		})
	}
	wg.Wait()
	return acked
}

// listConnectors pages through GET /v1/connectors on r.
func (c *cluster) listConnectors(r *replica) map[string]bool {
	c.t.Helper()
	have := map[string]bool{}
	cursor := ""
	for {
		path := "/v1/connectors?limit=100"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		b := c.mustDo(r, c.admin, http.MethodGet, path, nil, http.StatusOK)
		var page struct {
			Data []struct {
				Name string `json:"name"`
			} `json:"data"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			c.t.Fatalf("list connectors: %v %s", err, b)
		}
		for _, d := range page.Data {
			have[d.Name] = true
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			return have
		}
		cursor = *page.NextCursor
	}
}

func TestCluster_KilledReplicaDuringWebhookBurstDeliversEveryEvent(t *testing.T) {
	var (
		mu       sync.Mutex
		received = map[string]int{} // connector name -> deliveries
		total    atomic.Int64
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Name string `json:"name"`
			} `json:"data"`
		}
		if json.Unmarshal(b, &ev) == nil && ev.Type == "connector.created" {
			mu.Lock()
			received[ev.Data.Name]++
			mu.Unlock()
			total.Add(1)
		}
		time.Sleep(10 * time.Millisecond) // a receiver with some work to do: a backlog builds
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	c := newCluster(t, 3, shortLeases)
	c.mustDo(c.replicas[0], c.admin, http.MethodPost, "/v1/webhooks", map[string]any{
		"url": recv.URL + "/hook", "events": []string{"connector.created"},
	}, http.StatusCreated)

	// Once deliveries are under way, kill -9 the replica delivering them
	// (the holder of the webhook's lane lease).
	var victim *replica
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		if _, ok := within(30*time.Second, func() bool { return total.Load() >= 20 }); !ok {
			return
		}
		victim = c.laneHolder()
		if victim != nil {
			victim.kill()
		}
	}()
	acked := c.createConnectors("w", 300, 8, nil)
	<-killed
	if victim == nil {
		t.Fatal("no replica held the webhook's lane lease while deliveries were under way")
	}
	// The survivors deliver what the victim held once its lease expires.
	took, ok := within(90*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range acked {
			if received[n] == 0 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	var missing []string
	dup := 0
	for _, n := range acked {
		if received[n] == 0 {
			missing = append(missing, n)
		}
		if received[n] > 1 {
			dup++
		}
	}
	if !ok {
		t.Fatalf("%d of %d acknowledged connector.created events never delivered within %v: %v", len(missing), len(acked), took, missing[:min(10, len(missing))])
	}
	t.Logf("%s (the lane's holder) killed after 20 deliveries; all %d events delivered %v after the burst (%d more than once: at least once)",
		victim.name, len(acked), took.Round(time.Millisecond), dup)
}

// laneHolder is the replica whose id holds a webhook lane lease, read from
// the leases in the database and the id each replica logs at start.
func (c *cluster) laneHolder() *replica {
	conn, err := pgx.Connect(context.Background(), c.dbURL)
	if err != nil {
		c.t.Error(err)
		return nil
	}
	defer conn.Close(context.Background())
	var value []byte
	if err := conn.QueryRow(context.Background(),
		`SELECT value FROM kv WHERE bucket = 'leases' AND key LIKE 'webhooks/lane/%' LIMIT 1`).Scan(&value); err != nil {
		c.t.Errorf("read the lane lease: %v", err)
		return nil
	}
	var l struct {
		Owner string `json:"owner"`
	}
	_ = json.Unmarshal(value, &l)
	for _, r := range c.alive() {
		if l.Owner != "" && strings.Contains(r.logs.String(), `"replica":"`+l.Owner+`"`) {
			return r
		}
	}
	c.t.Errorf("no replica logged the lease owner %q", l.Owner)
	return nil
}

func TestCluster_ConcurrentRunsOnExpiredOAuthTokenRefreshOnce(t *testing.T) {
	as := oauthtest.New(t, oauthtest.Options{CodeTokenTTL: time.Second})
	c := newCluster(t, 3)
	r1 := c.replicas[0]
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer app.Close()
	c.mustDo(r1, c.admin, http.MethodPost, "/v1/connectors", map[string]any{
		"name": "crm", "baseUrl": as.APIURL(),
		"auth": map[string]any{
			"type": "oauth2", "grant": "authorization_code",
			"authorizationUrl": as.AuthorizeURL(), "tokenUrl": as.TokenURL(),
			"clientId": as.ClientID, "clientSecret": as.ClientSecret,
			"scopes": []string{"read"}, "redirectUrls": []string{app.URL + "/done"},
		},
	}, http.StatusCreated)
	c.mustDo(r1, c.admin, http.MethodPost, "/v1/connectors/crm/actions", map[string]any{"name": "me", "method": "GET", "path": "/me"}, http.StatusCreated)

	// The authorization-code flow through r1, as a browser would follow it.
	browser := &http.Client{Transport: bearer{c.admin}}
	req, _ := http.NewRequest(http.MethodGet, r1.url+"/v1/connectors/crm/connect?connection=team", nil)
	req.Header.Set("Accept", "application/json")
	res, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"status":"active"`) {
		t.Fatalf("connect: %d %s", res.StatusCode, b)
	}
	var conn struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	_ = json.Unmarshal(c.mustDo(r1, c.admin, http.MethodGet, "/v1/connectors/crm/connections/team", nil, http.StatusOK), &conn)
	time.Sleep(time.Until(conn.ExpiresAt) + 200*time.Millisecond) // the access token is now expired
	before := as.TokenRequests("refresh_token")

	var wg sync.WaitGroup
	codes := make([]int, 50)
	for i := range codes {
		wg.Go(func() {
			code, body := do(c.replicas[i%3], c.admin, http.MethodPost, "/v1/integrations/crm/run", map[string]any{"action": "me", "connection": "team"})
			codes[i] = code
			if code != http.StatusOK {
				t.Errorf("run %d on %s = %d %s", i, c.replicas[i%3].name, code, body)
			}
		})
	}
	wg.Wait()
	if n := as.TokenRequests("refresh_token") - before; n != 1 {
		t.Fatalf("50 concurrent runs over 3 replicas on an expired token made %d refresh requests, want 1", n)
	}
}

// bearer adds the admin key to requests to Switchboard only (not to the
// authorization server the browser is redirected to).
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestCluster_SurvivesPostgreSQLRestartUnderLoad(t *testing.T) {
	c := newCluster(t, 3)
	up := upstream(t)
	c.apiKeyConnector(c.replicas[0], "svc", up.URL, "/ping")
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg         sync.WaitGroup
		ok, failed atomic.Int64
		seq        atomic.Int64
		mu         sync.Mutex
		codes      = map[int]int{}
	)
	for w := range 12 {
		wg.Go(func() {
			for ctx.Err() == nil {
				r := c.replicas[w%3]
				var code int
				if w%2 == 0 {
					code, _ = do(r, c.admin, http.MethodPost, "/v1/integrations/svc/run", map[string]any{"action": "get"})
				} else {
					code, _ = do(r, c.admin, http.MethodPost, "/v1/connectors", map[string]any{
						"name": fmt.Sprintf("load%05d", seq.Add(1)), "baseUrl": "http://127.0.0.1:9",
						"auth": map[string]any{"type": "apiKey", "name": "X-API-Key", "in": "header"},
					})
				}
				if code == 200 || code == 201 {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	time.Sleep(time.Second)
	if err := c.pg.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := c.pg.Start(); err != nil {
		t.Fatal(err)
	}
	okAtRestart := ok.Load()
	// Every replica recovers by itself: ready, and both reads and writes work.
	for _, r := range c.replicas {
		took, recovered := within(30*time.Second, func() bool {
			code, _ := do(r, c.admin, http.MethodPost, "/v1/integrations/svc/run", map[string]any{"action": "get"})
			return code == http.StatusOK
		})
		if !recovered {
			t.Errorf("%s does not run actions %v after PostgreSQL restarted", r.name, took)
		}
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	if ok.Load() <= okAtRestart {
		t.Errorf("no request succeeded after PostgreSQL restarted")
	}
	for i, r := range c.replicas {
		select {
		case <-r.done:
			t.Errorf("replica %s exited", r.name)
		default:
		}
		name := fmt.Sprintf("after_restart_%d", i)
		c.mustDo(r, c.admin, http.MethodPost, "/v1/connectors", map[string]any{
			"name": name, "baseUrl": "http://127.0.0.1:9",
			"auth": map[string]any{"type": "apiKey", "name": "X-API-Key", "in": "header"},
		}, http.StatusCreated)
		for _, o := range c.replicas {
			c.mustDo(o, c.admin, http.MethodGet, "/v1/connectors/"+name, nil, http.StatusOK)
		}
	}
	t.Logf("under load: %d succeeded, %d failed across a PostgreSQL restart; statuses %v", ok.Load(), failed.Load(), codes)
	// While the database is down a request is refused as unavailable (503,
	// to retry), or fails at the transport while a replica drops its
	// connections; never an internal error.
	for code := range codes {
		if code != 200 && code != 201 && code != http.StatusServiceUnavailable {
			t.Errorf("%d requests answered %d during the restart; want only 200/201 or 503", codes[code], code)
		}
	}
}
