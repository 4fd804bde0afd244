// Package webhooktest is a real webhook receiver for tests: an HTTP server
// on loopback that verifies every delivery with the independent Standard
// Webhooks library (github.com/standard-webhooks/standard-webhooks), never
// with Switchboard's own signing code, and records what arrived. It can be
// taken down (connections refused), brought back on the same address, told
// to answer 500 or to answer slowly.
//
//	rcv := webhooktest.New(t)
//	// create a webhook with rcv.URL(), then:
//	rcv.Expect(secret)
//	webhooktest.WaitFor(t, "3 events", time.Minute, func() bool { return len(rcv.Delivered()) == 3 })
//	rcv.CheckClean(t)
package webhooktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
)

// Receiver is a real HTTP webhook receiver on loopback. It verifies
// every request with the independent Standard Webhooks library against each
// of the secrets it is told to expect, and records what arrived.
type Receiver struct {
	t    testing.TB
	addr string

	fail  atomic.Bool
	delay atomic.Int64 // nanoseconds

	mu       sync.Mutex
	srv      *http.Server
	verifier []*standardwebhooks.Webhook
	got      []Received
	problems []string
}

// Received is one request that reached the receiver.
type Received struct {
	// ID, Timestamp and Signature are the webhook-id, webhook-timestamp
	// and webhook-signature headers.
	ID        string
	Timestamp string
	Signature string
	// Body is the request body as received.
	Body []byte
	// Status is what the receiver answered: 204, 500 when told to fail, 400
	// when the request did not verify or was malformed.
	Status int
	// Event is Body decoded.
	Event struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		CreatedAt time.Time       `json:"createdAt"`
		Data      json.RawMessage `json:"data"`
	}
}

// New starts a receiver on 127.0.0.1 for the duration of t.
func New(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{t: t, addr: ln.Addr().String()}
	r.serve(ln)
	t.Cleanup(r.Down)
	return r
}

// URL is the receiver's webhook URL.
func (r *Receiver) URL() string { return "http://" + r.addr + "/hooks/switchboard" }

// Addr is the receiver's host:port.
func (r *Receiver) Addr() string { return r.addr }

// SetFail makes the receiver answer 500 (after verifying) while fail is true.
func (r *Receiver) SetFail(fail bool) { r.fail.Store(fail) }

// SetDelay makes the receiver wait d before answering each request.
func (r *Receiver) SetDelay(d time.Duration) { r.delay.Store(int64(d)) }

// Expect makes the receiver verify with each of secrets: every request must
// verify with every one of them (as during a rotation's grace period).
func (r *Receiver) Expect(secrets ...string) {
	r.t.Helper()
	var vs []*standardwebhooks.Webhook
	for _, s := range secrets {
		v, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			r.t.Fatal(err)
		}
		vs = append(vs, v)
	}
	r.mu.Lock()
	r.verifier = vs
	r.mu.Unlock()
}

func (r *Receiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Down closes the receiver: connections are refused until Up.
func (r *Receiver) Down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Up listens again on the same address.
func (r *Receiver) Up() {
	r.t.Helper()
	var (
		ln  net.Listener
		err error
	)
	for range 50 { // the port may linger briefly after Close
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatalf("receiver cannot listen again on %s: %v", r.addr, err)
	}
	r.serve(ln)
}

// ServeHTTP verifies and records one delivery.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	rec := Received{
		ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
		Signature: req.Header.Get("webhook-signature"), Body: body,
	}
	var problems []string
	if err != nil {
		problems = append(problems, "read body: "+err.Error())
	}
	if req.Method != http.MethodPost || req.URL.Path != "/hooks/switchboard" || req.Header.Get("Content-Type") != "application/json" {
		problems = append(problems, fmt.Sprintf("%s %s with Content-Type %q", req.Method, req.URL.Path, req.Header.Get("Content-Type")))
	}
	r.mu.Lock()
	vs := r.verifier
	r.mu.Unlock()
	if len(vs) == 0 {
		problems = append(problems, "receiver has no secret to verify with")
	}
	for i, v := range vs {
		if err := v.Verify(body, req.Header); err != nil {
			problems = append(problems, fmt.Sprintf("webhook-id %s: secret #%d: %v", rec.ID, i, err))
		}
	}
	if err := json.Unmarshal(body, &rec.Event); err != nil {
		problems = append(problems, "body is not an event: "+err.Error())
	} else if rec.Event.ID != rec.ID || rec.Event.Type == "" || rec.Event.CreatedAt.IsZero() || len(rec.Event.Data) == 0 {
		problems = append(problems, fmt.Sprintf("webhook-id %q with event %s", rec.ID, body))
	}
	if d := time.Duration(r.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	rec.Status = http.StatusNoContent
	if r.fail.Load() {
		rec.Status = http.StatusInternalServerError
	}
	if len(problems) > 0 {
		rec.Status = http.StatusBadRequest
	}
	r.mu.Lock()
	r.got = append(r.got, rec)
	r.problems = append(r.problems, problems...)
	r.mu.Unlock()
	w.WriteHeader(rec.Status)
}

// Received returns a copy of every request so far.
func (r *Receiver) Received() []Received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Received(nil), r.got...)
}

// Delivered returns the distinct webhook-ids answered with a 2xx.
func (r *Receiver) Delivered() map[string]Received {
	out := map[string]Received{}
	for _, g := range r.Received() {
		if g.Status < 300 {
			if _, dup := out[g.ID]; !dup {
				out[g.ID] = g
			}
		}
	}
	return out
}

// CheckClean fails the test on any request that did not verify or was
// malformed, and on a duplicate webhook-id whose body differs (a
// duplicate must be the same message, recognisable by its webhook-id).
func (r *Receiver) CheckClean(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.problems {
		t.Errorf("receiver: %s", p)
	}
	first := map[string][]byte{}
	for _, g := range r.got {
		if b, ok := first[g.ID]; ok && string(b) != string(g.Body) {
			t.Errorf("webhook-id %s delivered with two different bodies:\n%s\n%s", g.ID, b, g.Body)
		}
		first[g.ID] = g.Body
	}
}

// WaitFor polls cond until it holds or the deadline passes (a deadline
// against hanging, not a timing assertion).
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FastConfig lets webhooks reach loopback and retries fast: n retries
// spaced step, 2·step, ... up to 5·step (each ±20% jitter). It is a
// servertest.Option.
func FastConfig(n int, step time.Duration) func(*config.Config) {
	return func(c *config.Config) {
		c.Egress.Allow = []string{"127.0.0.0/8"}
		c.Webhooks.AttemptTimeout = config.Duration(5 * time.Second)
		c.Webhooks.RetrySchedule = nil
		for i := 1; i <= n; i++ {
			c.Webhooks.RetrySchedule = append(c.Webhooks.RetrySchedule, config.Duration(time.Duration(min(i, 5))*step))
		}
	}
}
