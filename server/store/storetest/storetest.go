// Package storetest gives tests a store shared by several "replicas" and
// stores that fail the way a networked database does: a commit whose
// outcome the caller never learns, a transaction function run again after
// a serialization failure.
package storetest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/pgtest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// Shared opens an empty store that the replicas of a test share, closed
// when the test ends: bbolt in t.TempDir(), or a fresh PostgreSQL database
// (pgtest) when SWITCHBOARD_TEST_STORE=postgres, as for servertest.
func Shared(t testing.TB) store.Store {
	t.Helper()
	var (
		s   store.Store
		err error
	)
	if os.Getenv("SWITCHBOARD_TEST_STORE") == "postgres" {
		s, err = store.OpenPostgres(context.Background(), pgtest.NewDatabase(t), store.PostgresOptions{Logger: slog.New(slog.DiscardHandler)})
	} else {
		s, err = store.OpenBolt(filepath.Join(t.TempDir(), "shared.db"))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// ErrCommitUnknown is what LostCommits' Update reports for a transaction
// that committed: the connection was lost before the answer came.
var ErrCommitUnknown = errors.New("storetest: connection lost during commit, outcome unknown")

// LostCommits wraps s so that every n-th Update commits and then reports
// ErrCommitUnknown, as when the connection to a database drops during
// COMMIT.
func LostCommits(s store.Store, n int) store.Store {
	return &lostCommits{Store: s, n: int64(n)}
}

type lostCommits struct {
	store.Store
	n     int64
	calls atomic.Int64
}

func (l *lostCommits) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := l.Store.Update(ctx, fn); err != nil {
		return err
	}
	if l.calls.Add(1)%l.n == 0 {
		return ErrCommitUnknown
	}
	return nil
}

// Retried wraps s so that every Update runs fn twice: first in a
// transaction that is rolled back, as PostgreSQL's store does after a
// serialization failure, then in one that commits.
func Retried(s store.Store) store.Store { return &retried{Store: s} }

type retried struct{ store.Store }

var errRollback = errors.New("storetest: serialization failure")

func (r *retried) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := r.Store.Update(ctx, func(tx store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		return err
	}
	return r.Store.Update(ctx, fn)
}
