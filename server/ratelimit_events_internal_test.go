package server

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ratelimit"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// countingRecorder counts the events recorded per type.
type countingRecorder struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countingRecorder) Record(_ store.Tx, t string, _ any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[t]++
	return nil
}

// TestRateLimitEvents_OncePerKeyAndMinuteAcrossReplicas: two replicas
// (each its own in-memory dedupe and queue) sharing one store refuse the
// same key many times in one minute: one ratelimit.exceeded is recorded;
// the next minute, one more.
func TestRateLimitEvents_OncePerKeyAndMinuteAcrossReplicas(t *testing.T) {
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := &countingRecorder{n: map[string]int{}}
	var mu sync.Mutex
	now := time.Date(2026, 11, 23, 12, 0, 10, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var replicas []*rateLimitEvents
	for range 2 {
		q := &events.Queue{Store: st, Recorder: rec, Now: clock}
		replicas = append(replicas, &rateLimitEvents{queue: q, now: clock})
	}
	p := &auth.Principal{ID: "key_1", Kind: "api_key"}
	refusal := ratelimit.Result{Dimension: ratelimit.Requests, Limit: 2, RetryAfter: 20 * time.Second}.Err()
	refuse := func() {
		for range 5 {
			for _, r := range replicas {
				r.refused(p, refusal)
				r.refused(&auth.Principal{ID: "key_1", Kind: "api_key"}, context.Canceled) // not a 429: ignored
			}
		}
		for _, r := range replicas {
			if err := r.queue.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	refuse()
	if got := rec.n[events.RateLimitExceeded]; got != 1 {
		t.Fatalf("%d events in the first minute, want 1", got)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	refuse()
	if got := rec.n[events.RateLimitExceeded]; got != 2 {
		t.Fatalf("%d events after the second minute, want 2", got)
	}
}
