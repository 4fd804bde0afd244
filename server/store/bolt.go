package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Bolt is the embedded bbolt backend.
type Bolt struct {
	db *bolt.DB
	// changes counts, per bucket, the committed transactions that wrote
	// to it; the map is fixed at open (one entry per bucket of Buckets).
	changes map[string]*atomic.Uint64
}

var _ Store = (*Bolt)(nil)

// OpenBolt opens (creating if needed) the database at path, creates the
// buckets and runs pending migrations. It fails fast with ErrInUse when
// another process holds the file.
func OpenBolt(path string) (*Bolt, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 500 * time.Millisecond})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%s: %w", path, ErrInUse)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &Bolt{db: db, changes: make(map[string]*atomic.Uint64, len(Buckets))}
	for _, b := range Buckets {
		s.changes[b] = new(atomic.Uint64)
	}
	if err := s.db.Update(func(btx *bolt.Tx) error {
		for _, b := range Buckets {
			if _, err := btx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("create buckets: %w", err)
	}
	if err := Migrate(context.Background(), s); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Path returns the database file path.
func (s *Bolt) Path() string { return s.db.Path() }

// View implements Store.
func (s *Bolt) View(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(func(btx *bolt.Tx) error { return fn(&boltTx{tx: btx}) })
}

// Update implements Store.
func (s *Bolt) Update(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := &boltTx{}
	err := s.db.Update(func(btx *bolt.Tx) error {
		t.tx = btx
		return fn(t)
	})
	if err == nil {
		for _, b := range t.written {
			s.changes[b].Add(1)
		}
		for _, f := range t.onCommit {
			f()
		}
	}
	return err
}

// Changes implements Store.
func (s *Bolt) Changes(buckets ...string) uint64 { return sumChanges(s.changes, buckets) }

// sumChanges adds up the commit counters of buckets.
func sumChanges(changes map[string]*atomic.Uint64, buckets []string) uint64 {
	var n uint64
	for _, b := range buckets {
		c, ok := changes[b]
		if !ok {
			panic("store: unknown bucket " + b)
		}
		n += c.Load()
	}
	return n
}

// Ping implements Store.
func (s *Bolt) Ping(ctx context.Context) error {
	return s.View(ctx, func(tx Tx) error {
		if tx.Get("meta", "schema_version") == nil {
			return errors.New("schema version missing")
		}
		return nil
	})
}

// Close implements Store.
func (s *Bolt) Close() error { return s.db.Close() }

type boltTx struct {
	tx       *bolt.Tx
	onCommit []func()
	// written lists the buckets written to (once each).
	written []string
}

// wrote notes a write to bucket for Changes.
func (t *boltTx) wrote(bucket string) {
	if !slices.Contains(t.written, bucket) {
		t.written = append(t.written, bucket)
	}
}

func (t *boltTx) bucket(name string) *bolt.Bucket {
	b := t.tx.Bucket([]byte(name))
	if b == nil {
		panic("store: unknown bucket " + name)
	}
	return b
}

func (t *boltTx) Get(bucket, key string) []byte { return t.bucket(bucket).Get([]byte(key)) }

func (t *boltTx) Put(bucket, key string, value []byte) error {
	t.wrote(bucket)
	return t.bucket(bucket).Put([]byte(key), value)
}

func (t *boltTx) Delete(bucket, key string) error {
	t.wrote(bucket)
	return t.bucket(bucket).Delete([]byte(key))
}

func (t *boltTx) Scan(bucket, prefix, after string, fn func(string, []byte) (bool, error)) error {
	c := t.bucket(bucket).Cursor()
	p := []byte(prefix)
	var k, v []byte
	if after != "" && after >= prefix {
		k, v = c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
	} else {
		// No cursor, or one before the prefix range: start at the prefix.
		k, v = c.Seek(p)
	}
	for ; k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		more, err := fn(string(k), v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *boltTx) NextSequence(bucket string) (uint64, error) {
	t.wrote(bucket)
	return t.bucket(bucket).NextSequence()
}

var _ Sequencer = (*boltTx)(nil)

// Sequence implements Sequencer.
func (t *boltTx) Sequence(bucket string) (uint64, error) { return t.bucket(bucket).Sequence(), nil }

// SetSequence implements Sequencer.
func (t *boltTx) SetSequence(bucket string, v uint64) error {
	b := t.bucket(bucket)
	if b.Sequence() >= v {
		return nil
	}
	t.wrote(bucket)
	return b.SetSequence(v)
}

func (t *boltTx) Writable() bool { return t.tx.Writable() }

func (t *boltTx) OnCommit(fn func()) { t.onCommit = append(t.onCommit, fn) }

// Migration upgrades the data from version To-1 to To.
type Migration struct {
	To    int
	Name  string
	Apply func(Tx) error
}

// Migrations lists every schema migration in order; SchemaVersion is the last.
var Migrations = []Migration{
	{To: 1, Name: "initial schema", Apply: func(Tx) error { return nil }},
}

// SchemaVersion is the version this binary writes.
func SchemaVersion() int { return Migrations[len(Migrations)-1].To }

// ErrSchemaTooNew is returned by Migrate (and so OpenBolt) for a database
// written by a newer binary; opening it would risk corrupting it.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary supports")

// Migrate applies pending migrations, each in its own transaction. It refuses
// a database written by a newer binary.
func Migrate(ctx context.Context, s Store) error {
	for {
		var cur int
		if err := s.View(ctx, func(tx Tx) error {
			if b := tx.Get("meta", "schema_version"); b != nil {
				_, err := fmt.Sscanf(string(b), "%d", &cur)
				return err
			}
			return nil
		}); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if cur > SchemaVersion() {
			return fmt.Errorf("%w: database has schema version %d, this binary supports up to %d; run a newer switchboard", ErrSchemaTooNew, cur, SchemaVersion())
		}
		if cur == SchemaVersion() {
			return nil
		}
		m := Migrations[cur]
		if m.To != cur+1 {
			return fmt.Errorf("store: Migrations[%d] upgrades to version %d, want %d", cur, m.To, cur+1)
		}
		if err := s.Update(ctx, func(tx Tx) error {
			if err := m.Apply(tx); err != nil {
				return err
			}
			return tx.Put("meta", "schema_version", fmt.Appendf(nil, "%d", m.To))
		}); err != nil {
			return fmt.Errorf("migration %d (%s): %w", m.To, m.Name, err)
		}
		slog.Info("applied migration", "version", m.To, "name", m.Name)
	}
}
