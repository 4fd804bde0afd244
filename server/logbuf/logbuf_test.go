package logbuf_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/logbuf"
)

// sink records each write it receives, so that tests can see batching.
type sink struct {
	mu     sync.Mutex
	writes []string
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, string(p))
	return len(p), nil
}

func (s *sink) all() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.writes), strings.Join(s.writes, "")
}

func TestWriterBatches(t *testing.T) {
	s := &sink{}
	w := logbuf.New(s, time.Hour) // no periodic flush during the test
	for range 100 {
		if _, err := w.Write([]byte("line\n")); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := s.all(); n != 0 {
		t.Fatalf("%d writes before any flush, want 0", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	n, got := s.all()
	if n != 1 || got != strings.Repeat("line\n", 100) {
		t.Fatalf("after Close: %d writes, %q", n, got)
	}
	// After Close, writes go straight through.
	if _, err := w.Write([]byte("late\n")); err != nil {
		t.Fatal(err)
	}
	if _, got := s.all(); !strings.HasSuffix(got, "late\n") {
		t.Fatalf("write after Close not written: %q", got)
	}
}

func TestWriterFlushesPeriodically(t *testing.T) {
	s := &sink{}
	w := logbuf.New(s, time.Millisecond)
	defer w.Close()
	w.Write([]byte("tick\n"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, got := s.all(); got == "tick\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("line never flushed")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWriterKeepsLinesWhole(t *testing.T) {
	s := &sink{}
	w := logbuf.New(s, time.Hour)
	line := strings.Repeat("x", 1000) + "\n"
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				w.Write([]byte(line))
			}
		})
	}
	wg.Wait()
	w.Close()
	n, got := s.all()
	if got != strings.Repeat(line, 1600) {
		t.Fatalf("output is not 1600 whole lines (%d bytes)", len(got))
	}
	if n < 2 {
		t.Fatalf("%d writes for %d bytes: the buffer never filled", n, len(got))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, wr := range s.writes {
		if len(wr)%len(line) != 0 {
			t.Fatalf("write %d splits a line (%d bytes)", i, len(wr))
		}
	}
}

func TestFlushAt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		log     func(*slog.Logger)
		flushed bool
	}{
		{"info is held", func(l *slog.Logger) { l.Info("request") }, false},
		{"warning is flushed", func(l *slog.Logger) { l.Warn("careful") }, true},
		{"error is flushed", func(l *slog.Logger) { l.Error("failed") }, true},
		{"error through WithAttrs is flushed", func(l *slog.Logger) { l.With("k", "v").Error("failed") }, true},
		{"error through WithGroup is flushed", func(l *slog.Logger) { l.WithGroup("g").Error("failed", "k", "v") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			w := logbuf.New(&out, time.Hour)
			l := slog.New(logbuf.FlushAt(slog.NewJSONHandler(w, nil), w, slog.LevelWarn))
			tc.log(l)
			// The hourly flush never runs here: only FlushAt can have written.
			if got := out.Len() > 0; got != tc.flushed {
				t.Fatalf("written at once = %v, want %v", got, tc.flushed)
			}
		})
	}
}
