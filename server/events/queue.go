package events

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/batch"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/lease"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// BucketOnce holds the keys of events recorded with Pending.Once, each
// with the time until which it is kept ("" for ever).
const BucketOnce = "events_once"

// Pending is an event waiting in a Queue.
type Pending struct {
	// Type is the event type; Data its payload (no secret, no prompt).
	Type string
	Data any
	// Once, when set, records the event only if no event with the same
	// Once key was recorded before, by this process or any other sharing
	// the store: "usage.budget_alert/key_…/2026-11-01/0.8".
	Once string
	// OnceUntil is how long the Once key is remembered; zero for ever.
	OnceUntil time.Time
}

// Emitter takes events of the request path without blocking (a Queue).
type Emitter interface {
	Emit(Pending)
}

var _ Emitter = (*Queue)(nil)

// Queue records events that happen outside a write transaction, on the
// request path (model calls, rate limits, the circuit breaker). Emit only
// appends to memory; a background loop records the waiting events in one
// transaction per FlushInterval (sooner when many wait), and Close records
// what is left. At most MaxPending events wait; past that the oldest are
// dropped and the drop is logged.
type Queue struct {
	// Store is written once per flush.
	Store store.Store
	// Recorder records each event inside the flush's transaction.
	Recorder Recorder
	// FlushInterval is the longest an event waits (default 1s).
	FlushInterval time.Duration
	// MaxPending bounds the events waiting in memory (default 10000).
	MaxPending int
	// Logger reports failed flushes and drops; slog.Default when nil.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Leases, when set, make the pruning of Once keys and batch claims run
	// on one replica at a time: the one holding the "events/prune" lease,
	// taken in the flush transaction. Without, every queue prunes.
	Leases *lease.Manager

	buf       batch.Buffer[Pending]
	init      sync.Once
	lastPrune time.Time // guarded by the buffer's one flush at a time
}

// pruneEvery is how often a flush deletes expired Once keys.
const pruneEvery = time.Hour

// pruneLease names the lease of that pruning.
const pruneLease = "events/prune"

func (q *Queue) now() time.Time {
	if q.Now != nil {
		return q.Now().UTC()
	}
	return time.Now().UTC()
}

// buffer is the queue's batch.Buffer, configured from its fields at first use.
func (q *Queue) buffer() *batch.Buffer[Pending] {
	q.init.Do(func() {
		q.buf.Write, q.buf.What = q.write, "events"
		q.buf.Interval, q.buf.MaxPending, q.buf.Logger, q.buf.Now = q.FlushInterval, q.MaxPending, q.Logger, q.Now
	})
	return &q.buf
}

// Start runs the background flusher until Close.
func (q *Queue) Start() { q.buffer().Start() }

// Emit queues an event; it never blocks on I/O. A nil Queue drops it.
func (q *Queue) Emit(e Pending) {
	if q == nil {
		return
	}
	q.buffer().Add(e)
}

// Flush records the waiting events in one transaction. On failure they
// wait for the next flush.
func (q *Queue) Flush(ctx context.Context) error { return q.buffer().Flush(ctx) }

// Close stops the flusher and records what is left.
func (q *Queue) Close(ctx context.Context) error { return q.buffer().Close(ctx) }

// write records one batch (none when its id was claimed: an earlier write
// of it committed), skipping events whose Once key was recorded, and once
// per pruneEvery deletes expired Once keys and batch claims (of every
// batch writer sharing the store).
func (q *Queue) write(ctx context.Context, id string, items []Pending) error {
	now := q.now()
	prune := now.Sub(q.lastPrune) >= pruneEvery
	if len(items) == 0 && !prune {
		return nil
	}
	err := q.Store.Update(ctx, func(tx store.Tx) error {
		prune := prune
		if prune && q.Leases != nil {
			held, err := q.Leases.AcquireTx(tx, pruneLease, 2*pruneEvery)
			if err != nil {
				return err
			}
			prune = held
		}
		if prune {
			if err := pruneOnce(tx, now); err != nil {
				return err
			}
			if err := batch.PruneClaims(tx, now); err != nil {
				return err
			}
		}
		if len(items) == 0 {
			return nil
		}
		if fresh, err := batch.Claim(tx, id); err != nil || !fresh {
			return err
		}
		for _, e := range items {
			if e.Once != "" {
				if v := tx.Get(BucketOnce, e.Once); v != nil && !expired(v, now) {
					continue
				}
				until := ""
				if !e.OnceUntil.IsZero() {
					until = e.OnceUntil.UTC().Format(time.RFC3339)
				}
				if err := tx.Put(BucketOnce, e.Once, []byte(until)); err != nil {
					return err
				}
			}
			if err := q.Recorder.Record(tx, e.Type, e.Data); err != nil {
				return fmt.Errorf("record %s: %w", e.Type, err)
			}
		}
		return nil
	})
	if err == nil && now.Sub(q.lastPrune) >= pruneEvery {
		q.lastPrune = now
	}
	return err
}

// expired reports whether a stored Once value's time has passed.
func expired(v []byte, now time.Time) bool {
	if len(v) == 0 {
		return false
	}
	t, err := time.Parse(time.RFC3339, string(v))
	return err == nil && !now.Before(t)
}

func pruneOnce(tx store.Tx, now time.Time) error {
	var old []string
	if err := tx.Scan(BucketOnce, "", "", func(k string, v []byte) (bool, error) {
		if expired(v, now) {
			old = append(old, k)
		}
		return true, nil
	}); err != nil {
		return err
	}
	for _, k := range old {
		if err := tx.Delete(BucketOnce, k); err != nil {
			return err
		}
	}
	return nil
}
