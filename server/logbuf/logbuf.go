// Package logbuf batches log output: request logging must not cost a write
// system call per request on the hot path. Lines are buffered and written
// out at a short interval, at once for warnings and errors, and on Close.
package logbuf

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Writer is an io.Writer that buffers what it is given and writes it to the
// underlying writer every interval, when the buffer fills, on Flush and on
// Close. It is safe for concurrent use; each Write reaches the underlying
// writer whole and in order. Writers never wait for the underlying write:
// a flush takes the buffered bytes and writes them after letting go of the
// buffer.
type Writer struct {
	w io.Writer

	mu     sync.Mutex // guards buf, spare, closed
	buf    []byte
	spare  []byte // the buffer of the previous flush, for reuse
	closed bool

	flushMu sync.Mutex // one flush at a time, so that batches stay in order

	stop chan struct{}
	done chan struct{}
}

// DefaultInterval is how long a line waits at most before it is written.
const DefaultInterval = 100 * time.Millisecond

// bufferSize is the batch size; a fuller buffer is written at once.
const bufferSize = 64 << 10

// New starts a Writer over w flushing every interval (DefaultInterval when
// zero or less). Close it to stop its goroutine and write what remains.
func New(w io.Writer, interval time.Duration) *Writer {
	if interval <= 0 {
		interval = DefaultInterval
	}
	b := &Writer{w: w, buf: make([]byte, 0, bufferSize), stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop(interval)
	return b
}

func (b *Writer) loop(interval time.Duration) {
	defer close(b.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = b.Flush()
		case <-b.stop:
			return
		}
	}
}

// Write buffers p (a copy). After Close, and when the buffer is full, it
// writes out before it returns.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.buf = append(b.buf, p...)
	now := b.closed || len(b.buf) >= bufferSize
	b.mu.Unlock()
	if now {
		if err := b.Flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes out everything buffered.
func (b *Writer) Flush() error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	out := b.buf
	b.buf = b.spare[:0]
	b.mu.Unlock()
	if len(out) == 0 {
		b.mu.Lock()
		b.spare = out
		b.mu.Unlock()
		return nil
	}
	_, err := b.w.Write(out)
	b.mu.Lock()
	if cap(out) <= 4*bufferSize { // keep an ordinary buffer, not a rare huge one
		b.spare = out[:0]
	} else {
		b.spare = nil
	}
	b.mu.Unlock()
	return err
}

// Close stops the periodic flush and writes out what remains; later
// writes go straight through. It does not close the underlying writer.
func (b *Writer) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	<-b.done
	return b.Flush()
}

// FlushAt wraps h so that a record at level or above is flushed to w at once
// (warnings and errors are not held back, in case the process dies next).
func FlushAt(h slog.Handler, w *Writer, level slog.Leveler) slog.Handler {
	return &flushHandler{Handler: h, w: w, level: level}
}

type flushHandler struct {
	slog.Handler
	w     *Writer
	level slog.Leveler
}

func (h *flushHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= h.level.Level() {
		if ferr := h.w.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h *flushHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &flushHandler{Handler: h.Handler.WithAttrs(attrs), w: h.w, level: h.level}
}

func (h *flushHandler) WithGroup(name string) slog.Handler {
	return &flushHandler{Handler: h.Handler.WithGroup(name), w: h.w, level: h.level}
}
