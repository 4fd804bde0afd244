package store

import (
	"context"
	"errors"
	"fmt"
)

// CopyOptions configure Copy.
type CopyOptions struct {
	// Merge copies into a target that already holds data: keys the source
	// has are overwritten with its values, other keys are kept, and each
	// sequence is raised to the larger of the two. Without Merge a target
	// holding data is refused (ErrTargetNotEmpty).
	Merge bool
	// PageKeys bounds the keys written per target transaction (default 500).
	PageKeys int
	// PageBytes bounds the value bytes written per target transaction
	// (default 4 MiB); a single larger value is written alone.
	PageBytes int
	// Progress, when set, is called after each page with the bucket and
	// the keys copied from it so far.
	Progress func(bucket string, keys int)
}

// CopyStats tells what Copy did, one entry per bucket in Buckets order.
type CopyStats struct {
	Buckets []BucketCopy
}

// BucketCopy is what Copy did to one bucket.
type BucketCopy struct {
	Bucket string
	// Keys is how many keys were copied.
	Keys int
	// Replaced is how many of them the target held with another value.
	Replaced int
	// Sequence is the target's sequence after the copy.
	Sequence uint64
}

// Keys is the number of keys copied over all buckets.
func (s CopyStats) Keys() int {
	n := 0
	for _, b := range s.Buckets {
		n += b.Keys
	}
	return n
}

// ErrTargetNotEmpty is returned by Copy when the target holds data and
// CopyOptions.Merge is not set.
var ErrTargetNotEmpty = errors.New("the target store already holds data")

// schemaKey is the meta key every backend writes at open; it is the
// target's own (both ends run this binary's migrations) and never copied.
const schemaKey = "schema_version"

// Copy copies every key of every bucket of Buckets, and the buckets'
// sequences, from src to dst. Values are copied byte for byte: sealed
// secrets stay sealed under the master key that sealed them.
//
// Keys are read and written in pages, one bounded transaction each, so a
// large database never makes one huge transaction. Copy is therefore not
// atomic: stop every server using src first (bbolt's lock enforces it),
// and if a copy stops halfway (an error, a cancelled ctx), run it again
// with Merge to finish it. Running it again with Merge is harmless: it
// writes the same values and sequences again.
//
// It fails with ErrTargetNotEmpty when dst holds any key (other than its
// schema version) unless opts.Merge is set, and when either store's
// transactions do not implement Sequencer.
func Copy(ctx context.Context, dst, src Store, opts CopyOptions) (CopyStats, error) {
	if opts.PageKeys <= 0 {
		opts.PageKeys = 500
	}
	if opts.PageBytes <= 0 {
		opts.PageBytes = 4 << 20
	}
	for _, s := range []struct {
		name string
		st   Store
	}{{"source", src}, {"target", dst}} {
		if err := s.st.View(ctx, func(tx Tx) error {
			if _, ok := tx.(Sequencer); !ok {
				return fmt.Errorf("the %s store (%T) cannot copy sequences: it does not implement store.Sequencer", s.name, tx)
			}
			return nil
		}); err != nil {
			return CopyStats{}, err
		}
	}
	if !opts.Merge {
		where, err := firstData(ctx, dst)
		if err != nil {
			return CopyStats{}, fmt.Errorf("inspect the target: %w", err)
		}
		if where != "" {
			return CopyStats{}, fmt.Errorf("%w (bucket %s): copy into an empty database, or pass --merge to overwrite the keys the source has and keep the others", ErrTargetNotEmpty, where)
		}
	}
	var stats CopyStats
	for _, b := range Buckets {
		if b == leasesBucket {
			continue // held by processes of the source, which are stopped
		}
		bc, err := copyBucket(ctx, dst, src, b, opts)
		stats.Buckets = append(stats.Buckets, bc)
		if err != nil {
			return stats, fmt.Errorf("copy bucket %s (%d keys copied so far; run the copy again with --merge to finish it): %w", b, bc.Keys, err)
		}
	}
	return stats, nil
}

// leasesBucket holds the leases of running replicas (server/lease): never
// copied.
const leasesBucket = "leases"

// firstData names the first bucket of s holding a key, "" when none does.
func firstData(ctx context.Context, s Store) (string, error) {
	where := ""
	err := s.View(ctx, func(tx Tx) error {
		for _, b := range Buckets {
			if err := tx.Scan(b, "", "", func(k string, _ []byte) (bool, error) {
				if b == "meta" && k == schemaKey {
					return true, nil
				}
				where = b
				return false, nil
			}); err != nil {
				return err
			}
			if where != "" {
				return nil
			}
		}
		return nil
	})
	return where, err
}

type kv struct {
	key   string
	value []byte
}

// copyBucket copies one bucket page by page, then its sequence.
func copyBucket(ctx context.Context, dst, src Store, bucket string, opts CopyOptions) (BucketCopy, error) {
	bc := BucketCopy{Bucket: bucket}
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return bc, err
		}
		var page []kv
		size := 0
		if err := src.View(ctx, func(tx Tx) error {
			page, size = page[:0], 0
			return tx.Scan(bucket, "", after, func(k string, v []byte) (bool, error) {
				if len(page) > 0 && (len(page) == opts.PageKeys || size+len(v) > opts.PageBytes) {
					return false, nil
				}
				if bucket == "meta" && k == schemaKey {
					return true, nil
				}
				page = append(page, kv{k, append([]byte(nil), v...)})
				size += len(v)
				return true, nil
			})
		}); err != nil {
			return bc, fmt.Errorf("read the source: %w", err)
		}
		if len(page) == 0 {
			break
		}
		replaced := 0
		if err := dst.Update(ctx, func(tx Tx) error {
			replaced = 0 // the store may run fn again
			for _, e := range page {
				if old := tx.Get(bucket, e.key); old != nil && string(old) != string(e.value) {
					replaced++
				}
				if err := tx.Put(bucket, e.key, e.value); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return bc, fmt.Errorf("write the target: %w", err)
		}
		bc.Keys += len(page)
		bc.Replaced += replaced
		after = page[len(page)-1].key
		if opts.Progress != nil {
			opts.Progress(bucket, bc.Keys)
		}
	}
	var seq uint64
	if err := src.View(ctx, func(tx Tx) error {
		sq, ok := tx.(Sequencer)
		if !ok {
			return fmt.Errorf("the source store (%T) cannot read sequences", tx)
		}
		var err error
		seq, err = sq.Sequence(bucket)
		return err
	}); err != nil {
		return bc, err
	}
	err := dst.Update(ctx, func(tx Tx) error {
		sq, ok := tx.(Sequencer)
		if !ok {
			return fmt.Errorf("the target store (%T) cannot set sequences", tx)
		}
		if err := sq.SetSequence(bucket, seq); err != nil {
			return err
		}
		var err error
		bc.Sequence, err = sq.Sequence(bucket)
		return err
	})
	return bc, err
}
