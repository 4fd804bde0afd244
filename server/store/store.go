// Package store is Switchboard's persistence layer: a transactional key-value
// interface that domain packages use, with bbolt as the embedded backend.
//
// Keys live in named buckets. Every write happens inside one Update
// transaction; callbacks registered with Tx.OnCommit run after it commits.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// ErrInUse is returned by Open when another process holds the database.
var ErrInUse = errors.New("database is in use by another process")

// Store opens transactions over the key-value data.
type Store interface {
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	// Update runs fn in a read-write transaction, committed when fn returns nil.
	Update(ctx context.Context, fn func(Tx) error) error
	// Changes counts the committed transactions that wrote to any of the
	// buckets: a value that changes whenever their data may have, for
	// caches of what they hold (read it before reading the data).
	Changes(buckets ...string) uint64
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
	// Close releases the store.
	Close() error
}

// Tx is one transaction. Byte slices it returns are valid only inside it.
type Tx interface {
	// Get returns the value under key, or nil when absent.
	Get(bucket, key string) []byte
	// Put stores value under key.
	Put(bucket, key string, value []byte) error
	// Delete removes key; deleting an absent key is not an error.
	Delete(bucket, key string) error
	// Scan calls fn for keys with prefix, in key order, starting after
	// the key `after` (when not empty), until fn returns false or an error.
	Scan(bucket, prefix, after string, fn func(key string, value []byte) (more bool, err error)) error
	// NextSequence returns a bucket-wide increasing integer.
	NextSequence(bucket string) (uint64, error)
	// Writable reports whether the transaction may write.
	Writable() bool
	// OnCommit registers fn to run after the transaction commits.
	OnCommit(fn func())
}

// Sequencer reads and raises a bucket's sequence, for copying a store.
type Sequencer interface {
	// Sequence returns the bucket's current sequence.
	Sequence(bucket string) (uint64, error)
	// SetSequence sets the bucket's sequence to at least v.
	SetSequence(bucket string, v uint64) error
}

// Buckets every backend creates at open.
var Buckets = []string{
	"meta", "apikeys", "apikeys_by_hash", "connectors", "actions", "secrets",
	"connections", "events", "webhooks", "deliveries", "outbox", "invocations",
	"oauth_states", "oauth_clients", "usage", "signing_keys", "llm_models",
	"oauth_tokens", "events_once", "leases", "toolsets", "connect_sessions",
	"connect_session_tokens", "console_sessions", "responses",
}

// GetJSON decodes the JSON value under key into v; errs.NotFound when absent.
func GetJSON(tx Tx, bucket, key string, v any) error {
	b := tx.Get(bucket, key)
	if b == nil {
		return errs.NotFound
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s/%s: %w", bucket, key, err)
	}
	return nil
}

// PutJSON stores v as JSON under key.
func PutJSON(tx Tx, bucket, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", bucket, key, err)
	}
	return tx.Put(bucket, key, b)
}

// Page lists JSON values under prefix after the cursor key; it returns at
// most limit items (at least 1) and the cursor to pass for the next page
// ("" at the end).
func Page[T any](tx Tx, bucket, prefix, cursor string, limit int) ([]T, string, error) {
	limit = max(limit, 1)
	var (
		out  []T
		next string
		last string
	)
	err := tx.Scan(bucket, prefix, cursor, func(k string, v []byte) (bool, error) {
		if len(out) == limit {
			next = last
			return false, nil
		}
		var item T
		if err := json.Unmarshal(v, &item); err != nil {
			return false, fmt.Errorf("decode %s/%s: %w", bucket, k, err)
		}
		out = append(out, item)
		last = k
		return true, nil
	})
	return out, next, err
}
