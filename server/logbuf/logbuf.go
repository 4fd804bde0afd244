// Package logbuf batches log output: request logging must not cost a write
// system call per request on the hot path. Lines are buffered and written
// out at a short interval, at once for warnings and errors, and on Close.
package logbuf

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Writer is an io.Writer that buffers what it is given and writes it to the
// underlying writer every interval, when the buffer fills, on Flush and on
// Close. It is safe for concurrent use; each Write reaches the underlying
// writer whole (a log line is never split across two flushes unless it is
// larger than the buffer).
type Writer struct {
	mu     sync.Mutex
	buf    *bufio.Writer
	closed bool
	stop   chan struct{}
	done   chan struct{}
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
	b := &Writer{buf: bufio.NewWriterSize(w, bufferSize), stop: make(chan struct{}), done: make(chan struct{})}
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

// Write buffers p. After Close it writes through.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Available() < len(p) && b.buf.Buffered() > 0 {
		if err := b.buf.Flush(); err != nil {
			return 0, err
		}
	}
	n, err := b.buf.Write(p)
	if err == nil && b.closed {
		err = b.buf.Flush()
	}
	return n, err
}

// Flush writes out everything buffered.
func (b *Writer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Flush()
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
