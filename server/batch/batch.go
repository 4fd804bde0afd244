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
	// Write writes one batch, at every flush, also an empty one (a writer
	// may have housekeeping to do). On error the batch waits for the next
	// flush.
	Write func(ctx context.Context, items []T) error
	// Interval is the longest an item waits (default 1s).
	Interval time.Duration
	// MaxPending bounds the items waiting in memory (default 10000).
	MaxPending int
	// Logger reports failed flushes and drops; slog.Default when nil.
	Logger *slog.Logger
	// What names the items in log lines ("events").
	What string

	mu       sync.Mutex
	pending  []T
	dropped  int
	flushMu  sync.Mutex // one flush at a time
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	started  sync.Once
	stopOnce sync.Once
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
	if len(b.pending) >= b.maxPending() {
		n := len(b.pending) - b.maxPending() + 1
		b.pending = append(b.pending[:0], b.pending[n:]...)
		b.dropped += n
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

// Flush hands the waiting items to Write; on failure they wait for the
// next flush (within MaxPending).
func (b *Buffer[T]) Flush(ctx context.Context) error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	items, dropped := b.pending, b.dropped
	b.pending, b.dropped = nil, 0
	b.mu.Unlock()
	if dropped > 0 {
		b.log().Warn(b.What+" dropped: too many waiting to be written", "dropped", dropped)
	}
	err := b.Write(ctx, items)
	if err != nil && len(items) > 0 {
		b.mu.Lock()
		b.pending = append(items, b.pending...)
		if over := len(b.pending) - b.maxPending(); over > 0 {
			b.pending = b.pending[over:]
			b.dropped += over
		}
		b.mu.Unlock()
	}
	return err
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
