package transform

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

func newSpinPipe(t *testing.T, spinFor time.Duration) (*spinReader, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return &spinReader{f: r, rc: rc, spinFor: spinFor}, w
}

func TestSpinReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spinFor time.Duration
		delay   time.Duration // before the writer writes
	}{
		{"data within the spin", time.Second, 0},
		{"data after the spin: parks and still reads", 100 * time.Microsecond, 20 * time.Millisecond},
		{"no spin at all", 0, 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr, w := newSpinPipe(t, tc.spinFor)
			go func() {
				time.Sleep(tc.delay)
				w.Write([]byte("outcome"))
			}()
			buf := make([]byte, 16)
			n, err := sr.Read(buf)
			if err != nil || string(buf[:n]) != "outcome" {
				t.Fatalf("Read = %q, %v", buf[:n], err)
			}
		})
	}
	t.Run("writer gone: EOF", func(t *testing.T) {
		sr, w := newSpinPipe(t, time.Second)
		w.Close()
		if _, err := sr.Read(make([]byte, 4)); !errors.Is(err, io.EOF) {
			t.Fatalf("err = %v, want EOF", err)
		}
	})
	t.Run("deadline passes: ErrDeadlineExceeded", func(t *testing.T) {
		sr, _ := newSpinPipe(t, 50*time.Microsecond)
		sr.f.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := sr.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", err)
		}
	})
	t.Run("deadline already passed while spinning", func(t *testing.T) {
		sr, _ := newSpinPipe(t, time.Second)
		sr.f.SetReadDeadline(time.Now().Add(-time.Second))
		if _, err := sr.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", err)
		}
	})
}
