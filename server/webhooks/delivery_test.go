package webhooks_test

// The delivery guarantees of issue 6, checked against the real server
// (Echo + bbolt, driven through the generated client) and a real receiver
// that verifies every signature with the independent Standard Webhooks
// library (webhooktest):
//
//   - receiver down, then answering 500, then back: every event arrives,
//     none is lost, repeats are retries of the same webhook-id;
//   - the server stopped (SIGTERM) or killed (SIGKILL) in the middle of
//     deliveries and started again on the same data: nothing pending is lost;
//   - 1,000 events in a burst reach a healthy receiver while API requests
//     keep being served; the test logs the throughput (no timing assertion).

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks/webhooktest"
)

var ctx = context.Background()

// childEnv, when set, makes this test binary run a Switchboard server
// (server.Run) instead of the tests: the restart tests start it as a
// separate process so that they can kill it for real.
const childEnv = "SWITCHBOARD_WEBHOOKS_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChildServer())
	}
	os.Exit(m.Run())
}

// runChildServer serves until SIGTERM, configured by the parent through
// flags in the environment and SWITCHBOARD_* variables.
func runChildServer() int {
	cfg, err := config.Load(strings.Fields(os.Getenv(childEnv)), os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	webhooktest.FastConfig(40, 20*time.Millisecond)(&cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := server.Run(ctx, cfg, log, io.Discard); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// childServer is a Switchboard server in another process.
type childServer struct {
	cmd  *exec.Cmd
	logs *bytes.Buffer
	done chan error
}

func startChild(t *testing.T, addr, dataDir, masterKey, adminKey string) *childServer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childEnv+"=--addr "+addr+" --data-dir "+dataDir,
		"SWITCHBOARD_MASTER_KEY="+masterKey,
		"SWITCHBOARD_ADMIN_KEY="+adminKey,
		"SWITCHBOARD_EGRESS_ALLOW=127.0.0.0/8",
	)
	c := &childServer{cmd: cmd, logs: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = c.logs, c.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-c.done })
	webhooktest.WaitFor(t, "the server process to answer", time.Minute, func() bool {
		select {
		case err := <-c.done:
			c.done <- err
			t.Fatalf("server process exited: %v\n%s", err, c.logs)
		default:
		}
		res, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return c
}

// stop sends sig and waits for the process to end.
func (c *childServer) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.done:
		c.done <- err
		if sig == syscall.SIGTERM && err != nil {
			t.Fatalf("graceful stop: %v\n%s", err, c.logs)
		}
	case <-time.After(time.Minute):
		t.Fatalf("server process did not stop on %v", sig)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func createWebhook(t *testing.T, c *client.ClientWithResponses, in client.WebhookCreate) *client.WebhookWithSecret {
	t.Helper()
	res, err := c.CreateWebhookWithResponse(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusCreated {
		t.Fatalf("create webhook = %d %s", res.StatusCode(), res.Body)
	}
	return res.JSON201
}

func createKey(t testing.TB, c *client.ClientWithResponses, name string) {
	t.Helper()
	res, err := c.CreateAPIKeyWithResponse(ctx, client.APIKeyCreate{Name: name, Scopes: []client.Scope{client.ScopeLLM}})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusCreated {
		t.Fatalf("create key = %d %s", res.StatusCode(), res.Body)
	}
}

// eventIDs lists the ids of the retained events of type typ created at or
// after since, oldest first.
func eventIDs(t *testing.T, c *client.ClientWithResponses, typ client.EventType, since time.Time) []string {
	t.Helper()
	var ids []string
	p := &client.ListEventsParams{Type: &typ, Order: ptr(client.EventOrderOldest), Limit: ptr(100)}
	for {
		res, err := c.ListEventsWithResponse(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != http.StatusOK {
			t.Fatalf("list events = %d %s", res.StatusCode(), res.Body)
		}
		for _, e := range res.JSON200.Data {
			if !e.CreatedAt.Before(since.Truncate(time.Millisecond)) {
				ids = append(ids, e.Id)
			}
		}
		if res.JSON200.NextCursor == nil {
			return ids
		}
		p.Cursor = res.JSON200.NextCursor
	}
}

// deliveries returns the whole delivery log of a webhook.
func deliveries(t *testing.T, c *client.ClientWithResponses, id string) []client.WebhookDelivery {
	t.Helper()
	var out []client.WebhookDelivery
	p := &client.ListWebhookDeliveriesParams{Limit: ptr(100)}
	for {
		res, err := c.ListWebhookDeliveriesWithResponse(ctx, id, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != http.StatusOK {
			t.Fatalf("list deliveries = %d %s", res.StatusCode(), res.Body)
		}
		out = append(out, res.JSON200.Data...)
		if res.JSON200.NextCursor == nil {
			return out
		}
		p.Cursor = res.JSON200.NextCursor
	}
}

func settled(t *testing.T, c *client.ClientWithResponses, id string, n int) func() bool {
	return func() bool {
		ds := deliveries(t, c, id)
		if len(ds) != n {
			return false
		}
		for _, d := range ds {
			if d.Status == client.WebhookDeliveryPending {
				return false
			}
		}
		return true
	}
}

func ptr[T any](v T) *T { return &v }

// TestDeliveryReceiverDownThen500ThenBack: the receiver refuses
// connections, then answers 500, then recovers. Every event arrives; each
// is acknowledged (2xx) exactly once; every other request is a retry of
// the same webhook-id; and the receiver acknowledged them in the order they
// happened. The delivery log accounts for every request.
func TestDeliveryReceiverDownThen500ThenBack(t *testing.T) {
	env := servertest.New(t, webhooktest.FastConfig(40, 20*time.Millisecond))
	c := env.Client(t)
	rcv := webhooktest.New(t)
	rcv.Down()
	w := createWebhook(t, c, client.WebhookCreate{Url: rcv.URL(), Events: []string{"api_key.created"}})
	rcv.Expect(w.Secret)

	head := func() client.WebhookDelivery {
		ds := deliveries(t, c, w.Id)
		return ds[len(ds)-1]
	}
	for i := range 10 {
		createKey(t, c, fmt.Sprintf("down-%d", i))
	}
	webhooktest.WaitFor(t, "failed attempts while the receiver is down", time.Minute, func() bool {
		h := head()
		return h.Attempts >= 2 && h.LastError != nil && strings.Contains(*h.LastError, "refused")
	})
	rcv.Up()
	rcv.SetFail(true)
	for i := range 10 {
		createKey(t, c, fmt.Sprintf("failing-%d", i))
	}
	webhooktest.WaitFor(t, "two 500s", time.Minute, func() bool {
		n := 0
		for _, g := range rcv.Received() {
			if g.Status == http.StatusInternalServerError {
				n++
			}
		}
		return n >= 2
	})
	rcv.SetFail(false)
	webhooktest.WaitFor(t, "all 20 events", time.Minute, func() bool { return len(rcv.Delivered()) == 20 })
	webhooktest.WaitFor(t, "the log to settle", time.Minute, settled(t, c, w.Id, 20))
	rcv.CheckClean(t)

	want := eventIDs(t, c, client.EventTypeAPIKeyCreated, w.CreatedAt)
	var acked []string
	for _, g := range rcv.Received() {
		if g.Status < 300 {
			acked = append(acked, g.ID)
		} else if !slices.Contains(want, g.ID) {
			t.Errorf("request with unknown webhook-id %s", g.ID)
		}
	}
	if !slices.Equal(acked, want) {
		t.Errorf("acknowledged %v,\nwant each event once, in order: %v", acked, want)
	}
	// The log counts every attempt: those refused while the receiver was
	// down, and every request it saw.
	attempts, refused := 0, 0
	for _, d := range deliveries(t, c, w.Id) {
		attempts += d.Attempts
		if d.Status != client.WebhookDeliverySucceeded {
			t.Errorf("delivery %s is %s", d.Id, d.Status)
		}
	}
	ds := deliveries(t, c, w.Id)
	first := ds[len(ds)-1]
	for _, g := range rcv.Received() {
		if g.ID == first.EventId {
			refused--
		}
	}
	refused += first.Attempts
	if got := len(rcv.Received()); got+refused != attempts || refused < 2 {
		t.Errorf("the log counts %d attempts; the receiver saw %d requests and %d were refused", attempts, got, refused)
	}
	t.Logf("20 events, %d requests (%d retries of the same webhook-ids), head delivery took %d attempts",
		len(rcv.Received()), len(rcv.Received())-20, head().Attempts)
}

// TestDeliverySurvivesRestart: the server process is stopped in the middle
// of 100 deliveries, gracefully (SIGTERM) or by a crash (SIGKILL), and
// started again on the same data directory: every event still arrives;
// repeats (at least once) carry the same webhook-id and body.
func TestDeliverySurvivesRestart(t *testing.T) {
	for _, tt := range []struct {
		name string
		sig  os.Signal
	}{
		{"graceful stop", syscall.SIGTERM},
		{"crash", syscall.SIGKILL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const n = 100
			addr, dir := freeAddr(t), t.TempDir()
			master := base64.StdEncoding.EncodeToString(vault.NewKey())
			admin := "sb_webhooks_restart_test_admin_key_0123456789"
			rcv := webhooktest.New(t)
			rcv.SetDelay(15 * time.Millisecond)

			p1 := startChild(t, addr, dir, master, admin)
			env := &servertest.Env{URL: "http://" + addr, AdminKey: admin}
			c := env.Client(t)
			w := createWebhook(t, c, client.WebhookCreate{Url: rcv.URL(), Events: []string{"api_key.created"}})
			rcv.Expect(w.Secret)
			for i := range n {
				createKey(t, c, fmt.Sprintf("k-%d", i))
			}
			webhooktest.WaitFor(t, "some deliveries", time.Minute, func() bool { return len(rcv.Received()) >= 20 })
			p1.stop(t, tt.sig)
			before := len(rcv.Delivered())
			if before >= n {
				t.Fatalf("all %d events were delivered before the stop; the test proves nothing", n)
			}

			startChild(t, addr, dir, master, admin)
			webhooktest.WaitFor(t, "every event after the restart", 2*time.Minute, func() bool { return len(rcv.Delivered()) == n })
			webhooktest.WaitFor(t, "the log to settle", time.Minute, settled(t, c, w.Id, n))
			rcv.CheckClean(t)
			want := eventIDs(t, c, client.EventTypeAPIKeyCreated, w.CreatedAt)
			got := make([]string, 0, n)
			for id := range rcv.Delivered() {
				got = append(got, id)
			}
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Errorf("delivered %d distinct events, want the %d recorded", len(got), len(want))
			}
			t.Logf("%s: %d of %d delivered before the stop, the rest after the restart; %d repeated deliveries (same webhook-id)",
				tt.name, before, n, len(rcv.Received())-n)
		})
	}
}

// TestDeliveryBurst1000: 1,000 events recorded in a burst are delivered to
// a healthy receiver, in order, while the API keeps answering. It logs the
// delivery throughput and API latencies during the burst; see also
// BenchmarkDelivery.
func TestDeliveryBurst1000(t *testing.T) {
	const n = 1000
	env := servertest.New(t, webhooktest.FastConfig(3, 10*time.Millisecond))
	c := env.Client(t)
	rcv := webhooktest.New(t)
	w := createWebhook(t, c, client.WebhookCreate{Url: rcv.URL(), Events: []string{"connector.created"}})
	rcv.Expect(w.Secret)

	baseline := apiLatencies(t, c, w.Id, 50)
	start := time.Now()
	recordBurst(t, env, n, 100)
	recorded := time.Since(start)

	var during []time.Duration
	for len(rcv.Delivered()) < n {
		during = append(during, apiLatencies(t, c, w.Id, 1)...)
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("only %d of %d delivered after 2 minutes", len(rcv.Delivered()), n)
		}
	}
	elapsed := time.Since(start)
	rcv.CheckClean(t)
	got := rcv.Received()
	for i := 1; i < len(got); i++ {
		// The sequence part of the id (after 12 hex digits of time) is the
		// order of recording.
		if got[i].ID[16:32] < got[i-1].ID[16:32] {
			t.Fatalf("delivery %d (%s) arrived after a later event (%s)", i, got[i].ID, got[i-1].ID)
		}
	}
	webhooktest.WaitFor(t, "the log to settle", time.Minute, settled(t, c, w.Id, n))
	t.Logf("burst of %d events (recorded in %s): delivered in %s = %.0f events/s to one webhook (in order, one at a time)",
		n, recorded.Round(time.Millisecond), elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	t.Logf("API latency (GET webhook + POST api-key) idle: %s; during the burst (%d samples): %s",
		summary(baseline), len(during), summary(during))
}

// recordBurst records n connector.created events in transactions of size
// each, the way domain services record them (Recorder in their own write).
func recordBurst(t testing.TB, env *servertest.Env, n, size int) {
	t.Helper()
	rec := env.Server.Webhooks()
	for i := 0; i < n; i += size {
		if err := env.Store.Update(ctx, func(tx store.Tx) error {
			for j := i; j < min(i+size, n); j++ {
				data := map[string]any{"name": fmt.Sprintf("c%04d", j), "baseUrl": "https://api.example.com", "version": 1}
				if err := rec.Record(tx, events.ConnectorCreated, data); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// apiLatencies times k rounds of a read and a write through the API.
func apiLatencies(t *testing.T, c *client.ClientWithResponses, webhookID string, k int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for i := range k {
		s := time.Now()
		res, err := c.GetWebhookWithResponse(ctx, webhookID)
		if err != nil || res.StatusCode() != http.StatusOK {
			t.Fatalf("get webhook during the burst: %v", err)
		}
		out = append(out, time.Since(s))
		s = time.Now()
		createKey(t, c, fmt.Sprintf("lat-%d-%d", i, time.Now().UnixNano()))
		out = append(out, time.Since(s))
	}
	return out
}

func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1))].Round(10 * time.Microsecond) }
	return fmt.Sprintf("p50 %s, p99 %s, max %s", q(0.5), q(0.99), s[len(s)-1].Round(10*time.Microsecond))
}

// BenchmarkDelivery measures delivery throughput: b.N events recorded in
// transactions of 100 and delivered to healthy receivers, for one webhook
// (strictly in order) and for four webhooks (four lanes in parallel).
//
//	go test ./server/webhooks/ -run '^$' -bench Delivery -benchtime 2000x
func BenchmarkDelivery(b *testing.B) {
	for _, hooks := range []int{1, 4} {
		b.Run(fmt.Sprintf("webhooks=%d", hooks), func(b *testing.B) {
			env := servertest.New(b, webhooktest.FastConfig(3, 10*time.Millisecond))
			c := env.Client(b)
			var rcvs []*webhooktest.Receiver
			for range hooks {
				rcv := webhooktest.New(b)
				res, err := c.CreateWebhookWithResponse(ctx, client.WebhookCreate{Url: rcv.URL(), Events: []string{"connector.created"}})
				if err != nil || res.StatusCode() != http.StatusCreated {
					b.Fatalf("create webhook: %v", err)
				}
				rcv.Expect(res.JSON201.Secret)
				rcvs = append(rcvs, rcv)
			}
			b.ResetTimer()
			recordBurst(b, env, b.N, 100)
			for _, rcv := range rcvs {
				for len(rcv.Received()) < b.N {
					time.Sleep(time.Millisecond)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*hooks)/b.Elapsed().Seconds(), "deliveries/s")
			for _, rcv := range rcvs {
				rcv.CheckClean(b)
			}
		})
	}
}
