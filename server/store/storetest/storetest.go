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

// Retried wraps s so that every Update's fn runs as PostgreSQL's store may
// run it after serialization failures: first in a transaction whose first
// write fails (the failure can surface at any statement), then to its end
// in a transaction that is rolled back (the failure can come at COMMIT),
// then in one that commits. A fn that keeps state across runs, or turns a
// failed write into a success, shows up as a wrong result.
func Retried(s store.Store) store.Store { return &retried{Store: s} }

type retried struct{ store.Store }

// errRollback is the injected serialization failure.
var errRollback = errors.New("storetest: serialization failure")

func (r *retried) Update(ctx context.Context, fn func(store.Tx) error) error {
	// Run 1: the first write fails.
	var injected bool
	err := r.Store.Update(ctx, func(tx store.Tx) error {
		ftx := &failingTx{Tx: tx, injected: &injected}
		if err := fn(ftx); err != nil && !injected {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		return err // a domain error before any write: not retried
	}
	// Run 2: to the end, then rolled back.
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

// failingTx fails its first write, and every call after it, as a
// PostgreSQL transaction does once a statement failed.
type failingTx struct {
	store.Tx
	injected *bool
}

func (f *failingTx) fail() error {
	*f.injected = true
	return errRollback
}

func (f *failingTx) Get(bucket, key string) []byte {
	if *f.injected {
		return nil
	}
	return f.Tx.Get(bucket, key)
}

func (f *failingTx) Put(string, string, []byte) error { return f.fail() }

func (f *failingTx) Delete(string, string) error { return f.fail() }

func (f *failingTx) NextSequence(string) (uint64, error) { return 0, f.fail() }

func (f *failingTx) Scan(bucket, prefix, after string, fn func(string, []byte) (bool, error)) error {
	if *f.injected {
		return errRollback
	}
	return f.Tx.Scan(bucket, prefix, after, fn)
}
