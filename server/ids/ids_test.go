package ids

import (
	"strings"
	"testing"
	"time"
)

func TestNewSortsByCreation(t *testing.T) {
	base := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		times []time.Time
	}{
		{"same millisecond", []time.Time{base, base, base, base}},
		{"later milliseconds", []time.Time{base, base.Add(time.Millisecond), base.Add(time.Second)}},
		{"clock steps back", []time.Time{base.Add(time.Hour), base, base.Add(-time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := ""
			for i, at := range tc.times {
				id := New("x_", at)
				if !strings.HasPrefix(id, "x_") || len(id) != 2+HexLen {
					t.Fatalf("id %q: want x_ and %d hex digits", id, HexLen)
				}
				if id <= prev {
					t.Fatalf("id %d %q does not sort after %q", i, id, prev)
				}
				prev = id
			}
		})
	}
}

func TestIncrementCarries(t *testing.T) {
	b := []byte{0x01, 0xff, 0xff}
	increment(b)
	if b[0] != 0x02 || b[1] != 0 || b[2] != 0 {
		t.Fatalf("increment = %x, want 020000", b)
	}
}

func TestSecret_PrefixAnd256RandomBits(t *testing.T) {
	a, b := Secret("sb_"), Secret("sb_")
	if !strings.HasPrefix(a, "sb_") || len(a) != len("sb_")+43 || a == b {
		t.Fatalf("secrets %q, %q", a, b)
	}
	if d := Digest(a); len(d) != 64 || d != Digest(a) || d == Digest(b) {
		t.Fatalf("digest %q", d)
	}
}
