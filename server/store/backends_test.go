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
