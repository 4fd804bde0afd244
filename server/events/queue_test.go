package events_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// log is a Recorder that keeps the types it recorded, failing on demand.
type log struct {
	mu    sync.Mutex
	types []string
	fail  error
}

func (l *log) Record(tx store.Tx, eventType string, data any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	tx.OnCommit(func() {
		l.mu.Lock()
		l.types = append(l.types, eventType)
		l.mu.Unlock()
	})
	return nil
}

func (l *log) recorded() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.types...)
}

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestQueue(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	t.Run("events wait in memory until a flush records them in order", func(t *testing.T) {
		rec := &log{}
		q := &events.Queue{Store: openStore(t), Recorder: rec, Now: clock}
		q.Emit(events.Pending{Type: "a"})
		q.Emit(events.Pending{Type: "b"})
		if got := rec.recorded(); len(got) != 0 {
			t.Fatalf("recorded before a flush: %v", got)
		}
		if err := q.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := rec.recorded(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
			t.Fatalf("recorded %v, want [a b]", got)
		}
	})

	t.Run("a Once key records its event once, across queues sharing the store, until it expires", func(t *testing.T) {
		st := openStore(t)
		rec := &log{}
		q1 := &events.Queue{Store: st, Recorder: rec, Now: clock}
		q2 := &events.Queue{Store: st, Recorder: rec, Now: clock}
		once := events.Pending{Type: "alert", Once: "alert/k/1", OnceUntil: now.Add(time.Minute)}
		q1.Emit(once)
		q1.Emit(once) // twice in one batch
		if err := q1.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		q2.Emit(once) // another replica
		if err := q2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := rec.recorded(); len(got) != 1 {
			t.Fatalf("recorded %v, want one alert", got)
		}
		now = now.Add(2 * time.Minute) // the key expired
		q2.Emit(once)
		if err := q2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := rec.recorded(); len(got) != 2 {
			t.Fatalf("recorded %v, want a second alert once the key expired", got)
		}
	})

	t.Run("a failed flush keeps the events for the next one", func(t *testing.T) {
		rec := &log{fail: errors.New("disk full")}
		q := &events.Queue{Store: openStore(t), Recorder: rec, Now: clock}
		q.Emit(events.Pending{Type: "a", Once: "a/1"})
		if err := q.Flush(ctx); err == nil {
			t.Fatal("flush succeeded with a failing recorder")
		}
		rec.mu.Lock()
		rec.fail = nil
		rec.mu.Unlock()
		if err := q.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := rec.recorded(); len(got) != 1 {
			t.Fatalf("recorded %v after the retry, want [a]", got)
		}
	})

	t.Run("past MaxPending the oldest events are dropped", func(t *testing.T) {
		rec := &log{}
		q := &events.Queue{Store: openStore(t), Recorder: rec, Now: clock, MaxPending: 2}
		for _, typ := range []string{"a", "b", "c"} {
			q.Emit(events.Pending{Type: typ})
		}
		if err := q.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := rec.recorded(); len(got) != 2 || got[0] != "b" || got[1] != "c" {
			t.Fatalf("recorded %v, want [b c]", got)
		}
	})

	t.Run("Close records what is left", func(t *testing.T) {
		rec := &log{}
		q := &events.Queue{Store: openStore(t), Recorder: rec, Now: clock, FlushInterval: time.Hour}
		q.Start()
		q.Emit(events.Pending{Type: "last"})
		if err := q.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got := rec.recorded(); len(got) != 1 {
			t.Fatalf("recorded %v, want [last]", got)
		}
	})

	t.Run("a nil queue drops events", func(t *testing.T) {
		var q *events.Queue
		q.Emit(events.Pending{Type: "a"})
	})
}
