// Package batch keeps what the request path produces (events, log
// entries) in memory and writes it in batches from a background loop, so
// that a request never waits for the disk.
package batch

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Size is how many waiting items trigger a flush before the interval ends.
const Size = 256

// Buffer holds items until a flush hands them to Write: every Interval
// (sooner once Size items wait), on Flush and on Close. At most
// MaxPending items wait; past that the oldest are dropped and the drop is
// logged. Configure it before its first use; the zero Buffer works
// without Start, writing only when flushed.
type Buffer[T any] struct {
	// Write writes one batch, at every flush, also an empty one (id "":
	// a writer may have housekeeping to do). On error the batch waits for
	// the next flush and is written again with the same id: Write claims
	// the id (Claim) in its transaction and skips a batch already claimed,
	// whose earlier write committed though it reported an error.
	Write func(ctx context.Context, id string, items []T) error
	// Now is the clock for batch ids; time.Now when nil.
	Now func() time.Time
	// Interval is the longest an item waits (default 1s).
	Interval time.Duration
	// MaxPending bounds the items waiting in memory (default 10000).
	MaxPending int
	// Logger reports failed flushes and drops; slog.Default when nil.
	Logger *slog.Logger
	// What names the items in log lines ("events").
	What string

	mu      sync.Mutex
	pending []T
	// unsent are the batches taken from pending whose write failed, oldest
	// first, each with its id; guarded by mu, changed only under flushMu.
	unsent   []unsent[T]
	dropped  int
	flushMu  sync.Mutex // one flush at a time
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	started  sync.Once
	stopOnce sync.Once
}

type unsent[T any] struct {
	id    string
	items []T
}

func (b *Buffer[T]) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// waiting counts the items in pending and unsent; b.mu held.
func (b *Buffer[T]) waiting() int {
	n := len(b.pending)
	for _, u := range b.unsent {
		n += len(u.items)
	}
	return n
}

// dropOldest drops the n oldest waiting items; b.mu held.
func (b *Buffer[T]) dropOldest(n int) {
	b.dropped += n
	for n > 0 && len(b.unsent) > 0 {
		u := &b.unsent[0]
		k := min(n, len(u.items))
		u.items, n = u.items[k:], n-k
		if len(u.items) == 0 {
			b.unsent = b.unsent[1:]
		}
	}
	b.pending = append(b.pending[:0], b.pending[n:]...)
}

func (b *Buffer[T]) maxPending() int {
	if b.MaxPending > 0 {
		return b.MaxPending
	}
	return 10000
}

func (b *Buffer[T]) log() *slog.Logger {
	if b.Logger != nil {
		return b.Logger
	}
	return slog.Default()
}

// Start runs the background flusher until Close.
func (b *Buffer[T]) Start() {
	b.started.Do(func() {
		b.kick = make(chan struct{}, 1)
		b.stop = make(chan struct{})
		b.done = make(chan struct{})
		interval := b.Interval
		if interval <= 0 {
			interval = time.Second
		}
		go func() {
			defer close(b.done)
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-b.stop:
					return
				case <-t.C:
				case <-b.kick:
				}
				ctx, cancel := context.WithTimeout(context.Background(), interval+10*time.Second)
				if err := b.Flush(ctx); err != nil {
					b.log().Error(b.What+" flush failed; kept in memory for the next attempt", "error", err.Error())
				}
				cancel()
			}
		}()
	})
}

// Add queues an item; it only appends to memory.
func (b *Buffer[T]) Add(item T) {
	b.mu.Lock()
	if n := b.waiting() - b.maxPending() + 1; n > 0 {
		b.dropOldest(n)
	}
	b.pending = append(b.pending, item)
	full := len(b.pending) >= Size
	b.mu.Unlock()
	if full && b.kick != nil {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// Flush hands the waiting items to Write, the batches that failed before
// first, each in its own call; on failure they wait for the next flush
// (within MaxPending).
func (b *Buffer[T]) Flush(ctx context.Context) error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	if len(b.pending) > 0 {
		b.unsent = append(b.unsent, unsent[T]{id: NewID(b.now()), items: b.pending})
		b.pending = nil
	}
	batches, dropped := b.unsent, b.dropped
	b.dropped = 0
	b.mu.Unlock()
	if dropped > 0 {
		b.log().Warn(b.What+" dropped: too many waiting to be written", "dropped", dropped)
	}
	if len(batches) == 0 {
		return b.Write(ctx, "", nil)
	}
	for _, u := range batches {
		if err := b.Write(ctx, u.id, u.items); err != nil {
			return err
		}
		b.mu.Lock()
		// Add may have dropped items of this batch meanwhile, never
		// reordered the batches.
		if len(b.unsent) > 0 && b.unsent[0].id == u.id {
			b.unsent = b.unsent[1:]
		}
		b.mu.Unlock()
	}
	return nil
}

// Close stops the flusher and writes what is left.
func (b *Buffer[T]) Close(ctx context.Context) error {
	if b.done != nil {
		b.stopOnce.Do(func() { close(b.stop) })
		select {
		case <-b.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.Flush(ctx)
}
