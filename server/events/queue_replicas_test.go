package events_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/lease"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store/storetest"
)

// storeRecorder records each event as a key of the events bucket, in the
// flush's transaction, as the webhook recorder does.
type storeRecorder struct{}

func (storeRecorder) Record(tx store.Tx, eventType string, data any) error {
	seq, err := tx.NextSequence("events")
	if err != nil {
		return err
	}
	return tx.Put("events", fmt.Sprintf("%016x", seq), fmt.Appendf(nil, "%s %v", eventType, data))
}

// Replicas' queues flushing into one store record every event once, and
// an event with a Once key once over all replicas, also when a commit's
// answer is lost (the batch is written again) or the store runs a
// transaction function again.
func TestQueues_OnOneStoreRecordEveryEventOnce(t *testing.T) {
	ctx := context.Background()
	shared := storetest.Shared(t)
	replicas := []store.Store{
		shared,
		storetest.LostCommits(shared, 2),
		storetest.LostCommits(storetest.Retried(shared), 3),
	}
	const workers, perWorker = 3, 100
	queues := make([]*events.Queue, len(replicas))
	var wg sync.WaitGroup
	for i, st := range replicas {
		queues[i] = &events.Queue{Store: st, Recorder: storeRecorder{}}
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range perWorker {
					queues[i].Emit(events.Pending{Type: "llm.called", Data: fmt.Sprintf("r%d-w%d-%d", i, w, n)})
					if n%25 == 0 {
						queues[i].Emit(events.Pending{Type: "usage.budget_alert", Data: "once", Once: fmt.Sprintf("alert/%d", n)})
					}
					if n%10 == 0 {
						_ = queues[i].Flush(ctx) // a lost answer is retried by a later flush
					}
				}
			}()
		}
	}
	wg.Wait()
	for i, q := range queues {
		var err error
		for range 5 {
			if err = q.Close(ctx); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	seen := map[string]int{}
	if err := shared.View(ctx, func(tx store.Tx) error {
		return tx.Scan("events", "", "", func(_ string, v []byte) (bool, error) {
			seen[string(v)]++
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if n := seen["usage.budget_alert once"]; n != 4 {
		t.Errorf("%d events with Once keys recorded, want 4 (one per key over all replicas)", n)
	}
	delete(seen, "usage.budget_alert once")
	if want := len(replicas) * workers * perWorker; len(seen) != want {
		t.Errorf("%d distinct events recorded, want %d", len(seen), want)
	}
	for e, n := range seen {
		if n != 1 {
			t.Errorf("event %q recorded %d times", e, n)
		}
	}
}

// The pruning of expired Once keys runs on the replica holding its lease;
// another replica's queue leaves them until that replica releases it.
func TestQueues_PruneOnTheReplicaHoldingTheLease(t *testing.T) {
	ctx := context.Background()
	shared := storetest.Shared(t)
	a, b := lease.New(shared, lease.Options{}), lease.New(shared, lease.Options{})
	flush := func(m *lease.Manager) {
		t.Helper()
		q := &events.Queue{Store: shared, Recorder: storeRecorder{}, Leases: m}
		q.Emit(events.Pending{Type: "llm.called", Data: "x"})
		if err := q.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	expiredKey := func(put bool) bool {
		t.Helper()
		var there bool
		if err := shared.Update(ctx, func(tx store.Tx) error {
			if put {
				return tx.Put(events.BucketOnce, "alert/old", []byte("2000-01-01T00:00:00Z"))
			}
			there = tx.Get(events.BucketOnce, "alert/old") != nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return there
	}
	flush(a) // a takes the pruning lease
	steps := []struct {
		name      string
		do        func()
		wantThere bool
	}{
		{"another replica's flush leaves an expired key", func() { flush(b) }, true},
		{"the holder's flush prunes it", func() { flush(a) }, false},
		{"another replica prunes once the holder released its leases", func() {
			if err := a.ReleaseAll(ctx); err != nil {
				t.Fatal(err)
			}
			flush(b)
		}, false},
	}
	for _, st := range steps {
		expiredKey(true)
		st.do()
		if got := expiredKey(false); got != st.wantThere {
			t.Fatalf("%s: expired key there = %v, want %v", st.name, got, st.wantThere)
		}
	}
}
