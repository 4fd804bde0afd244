package store

import (
	"log/slog"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/pgtest"
)

// backend opens an empty store of one kind for a test.
type backend struct {
	name string
	open func(t *testing.T) Store
}

// backends are every Store implementation: the behaviour tests run on each.
var backends = []backend{
	{"bbolt", func(t *testing.T) Store { s, _ := openTemp(t); return s }},
	{"postgres", func(t *testing.T) Store { return openPostgres(t, pgtest.NewDatabase(t)) }},
}

// forEachBackend runs fn as a subtest on a fresh store of every backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, s Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.open(t)) })
	}
}

// openPostgres opens the database at url, closed when t ends.
func openPostgres(t testing.TB, url string) *Postgres {
	t.Helper()
	s, err := OpenPostgres(bg, url, PostgresOptions{Logger: slog.New(slog.DiscardHandler), MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestSequences(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		next := func() uint64 {
			t.Helper()
			var n uint64
			if err := s.Update(bg, func(tx Tx) error {
				var err error
				n, err = tx.NextSequence("events")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return n
		}
		seq := func() uint64 {
			t.Helper()
			var n uint64
			if err := s.View(bg, func(tx Tx) error {
				var err error
				n, err = tx.(Sequencer).Sequence("events")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if got := seq(); got != 0 {
			t.Fatalf("Sequence of a new bucket = %d, want 0", got)
		}
		a, b := next(), next()
		if a == 0 || b <= a || seq() != b {
			t.Fatalf("NextSequence = %d then %d, Sequence = %d; want increasing and Sequence the last", a, b, seq())
		}
		raise := func(v uint64) {
			t.Helper()
			if err := s.Update(bg, func(tx Tx) error { return tx.(Sequencer).SetSequence("events", v) }); err != nil {
				t.Fatal(err)
			}
		}
		raise(100)
		if got := next(); got != 101 {
			t.Errorf("NextSequence after SetSequence(100) = %d, want 101", got)
		}
		raise(5) // never lowers
		if got := next(); got != 102 {
			t.Errorf("NextSequence after SetSequence(5) = %d, want 102", got)
		}
	})
}
