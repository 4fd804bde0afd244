package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// openCopyStore opens an empty store for a copy's source or target; the
// one place to switch these tests to another backend.
func openCopyStore(t *testing.T) store.Store {
	t.Helper()
	s, err := store.OpenBolt(filepath.Join(t.TempDir(), "switchboard.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// dump is every key of every bucket (bucket/key → value) and every
// bucket's sequence.
type dump struct {
	keys map[string]string
	seqs map[string]uint64
}

func dumpStore(t *testing.T, s store.Store) dump {
	t.Helper()
	d := dump{keys: map[string]string{}, seqs: map[string]uint64{}}
	if err := s.View(context.Background(), func(tx store.Tx) error {
		for _, b := range store.Buckets {
			if err := tx.Scan(b, "", "", func(k string, v []byte) (bool, error) {
				d.keys[b+"/"+k] = string(v)
				return true, nil
			}); err != nil {
				return err
			}
			n, err := tx.(store.Sequencer).Sequence(b)
			if err != nil {
				return err
			}
			d.seqs[b] = n
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return d
}

func update(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// masterKey seals the source's secrets.
var masterKey = vault.NewKey()

// fillSource writes 25 keys into each of a few buckets (more than a page),
// raises sequences and seals two secrets.
func fillSource(t *testing.T, s store.Store) {
	t.Helper()
	v, err := vault.New(masterKey)
	if err != nil {
		t.Fatal(err)
	}
	update(t, s, func(tx store.Tx) error {
		for _, b := range []string{"apikeys", "connectors", "usage", "meta"} {
			for i := range 25 {
				if err := tx.Put(b, fmt.Sprintf("k%03d", i), fmt.Appendf(nil, `{"bucket":%q,"i":%d}`, b, i)); err != nil {
					return err
				}
			}
		}
		for range 7 {
			if _, err := tx.NextSequence("invocations"); err != nil {
				return err
			}
		}
		if _, err := tx.NextSequence("events"); err != nil {
			return err
		}
		if err := v.Put(tx, "connection/weather/default", []byte("s3cret-api-key")); err != nil {
			return err
		}
		return v.Put(tx, "connector/github/clientSecret", []byte("gh-client-secret"))
	})
}

func TestCopy(t *testing.T) {
	ctx := context.Background()
	small := store.CopyOptions{PageKeys: 4}
	merge := store.CopyOptions{PageKeys: 4, Merge: true}

	tests := []struct {
		name string
		// target prepares the target before the copy.
		target func(t *testing.T, dst store.Store)
		opts   store.CopyOptions
		// copies is how many times Copy runs (each with opts).
		copies  int
		wantErr error
		// check inspects the target after the copies; src and before are
		// dumps of the source and of the target before the copy.
		check func(t *testing.T, src, before, after dump, stats store.CopyStats)
	}{
		{
			name: "an empty target receives every key and sequence",
			opts: small, copies: 1,
			check: func(t *testing.T, src, _, after dump, stats store.CopyStats) {
				sameDump(t, after, src)
				if got, want := stats.Keys(), len(src.keys)-1; got != want { // schema_version is the target's own
					t.Errorf("stats count %d keys, want %d", got, want)
				}
				if len(stats.Buckets) != len(store.Buckets)-1 { // not the leases
					t.Errorf("stats name %d buckets, want %d", len(stats.Buckets), len(store.Buckets)-1)
				}
			},
		},
		{
			name: "a target holding data is refused and left as it was",
			target: func(t *testing.T, dst store.Store) {
				update(t, dst, func(tx store.Tx) error { return tx.Put("webhooks", "wh_1", []byte(`{}`)) })
			},
			opts: small, copies: 1, wantErr: store.ErrTargetNotEmpty,
			check: func(t *testing.T, _, before, after dump, _ store.CopyStats) { sameDump(t, after, before) },
		},
		{
			name: "a target holding only a sequence is empty enough",
			target: func(t *testing.T, dst store.Store) {
				update(t, dst, func(tx store.Tx) error { _, err := tx.NextSequence("outbox"); return err })
			},
			opts: small, copies: 1,
			check: func(t *testing.T, src, _, after dump, _ store.CopyStats) {
				want := dump{keys: src.keys, seqs: maps.Clone(src.seqs)}
				want.seqs["outbox"] = 1
				sameDump(t, after, want)
			},
		},
		{
			name: "merge overwrites the source's keys, keeps the others and raises sequences to the larger",
			target: func(t *testing.T, dst store.Store) {
				update(t, dst, func(tx store.Tx) error {
					if err := tx.Put("apikeys", "k001", []byte("old value")); err != nil {
						return err
					}
					if err := tx.Put("webhooks", "wh_only_in_target", []byte(`{}`)); err != nil {
						return err
					}
					for range 12 { // above the source's 1
						if _, err := tx.NextSequence("events"); err != nil {
							return err
						}
					}
					_, err := tx.NextSequence("invocations") // below the source's 7
					return err
				})
			},
			opts: merge, copies: 1,
			check: func(t *testing.T, src, _, after dump, stats store.CopyStats) {
				want := dump{keys: maps.Clone(src.keys), seqs: maps.Clone(src.seqs)}
				want.keys["webhooks/wh_only_in_target"] = `{}`
				want.seqs["events"] = 12
				sameDump(t, after, want)
				if r := stats.Buckets[1].Replaced; stats.Buckets[1].Bucket != "apikeys" || r != 1 {
					t.Errorf("apikeys: %d keys replaced, want 1", r)
				}
			},
		},
		{
			name: "running the copy again with merge changes nothing",
			opts: merge, copies: 3,
			check: func(t *testing.T, src, _, after dump, stats store.CopyStats) {
				sameDump(t, after, src)
				for _, b := range stats.Buckets {
					if b.Replaced != 0 {
						t.Errorf("rerun replaced %d keys of %s", b.Replaced, b.Bucket)
					}
				}
			},
		},
		{
			name: "running the copy again without merge is refused",
			opts: small, copies: 2, wantErr: store.ErrTargetNotEmpty,
			check: func(t *testing.T, src, _, after dump, _ store.CopyStats) { sameDump(t, after, src) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, dst := openCopyStore(t), openCopyStore(t)
			fillSource(t, src)
			if tt.target != nil {
				tt.target(t, dst)
			}
			srcDump, before := dumpStore(t, src), dumpStore(t, dst)
			var (
				stats store.CopyStats
				err   error
			)
			for range tt.copies {
				if stats, err = store.Copy(ctx, dst, src, tt.opts); err != nil {
					break
				}
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Copy: %v, want %v", err, tt.wantErr)
			}
			tt.check(t, srcDump, before, dumpStore(t, dst), stats)
			sameDump(t, dumpStore(t, src), srcDump) // the source is only read
		})
	}
}

func TestCopy_StoppedHalfwayIsFinishedByMerge(t *testing.T) {
	src, dst := openCopyStore(t), openCopyStore(t)
	fillSource(t, src)
	ctx, cancel := context.WithCancel(context.Background())
	pages := 0
	_, err := store.Copy(ctx, dst, src, store.CopyOptions{PageKeys: 4, Progress: func(string, int) {
		if pages++; pages == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Copy: %v, want context.Canceled", err)
	}
	if got := dumpStore(t, dst); len(got.keys) <= 1 || len(got.keys) >= len(dumpStore(t, src).keys) {
		t.Fatalf("the stopped copy wrote %d keys; want some but not all", len(got.keys))
	}
	if _, err := store.Copy(context.Background(), dst, src, store.CopyOptions{PageKeys: 4}); !errors.Is(err, store.ErrTargetNotEmpty) {
		t.Fatalf("rerun without merge: %v, want ErrTargetNotEmpty", err)
	}
	if _, err := store.Copy(context.Background(), dst, src, store.CopyOptions{PageKeys: 4, Merge: true}); err != nil {
		t.Fatal(err)
	}
	sameDump(t, dumpStore(t, dst), dumpStore(t, src))
}

func TestCopy_SealedSecretsOpenWithTheSameMasterKey(t *testing.T) {
	src, dst := openCopyStore(t), openCopyStore(t)
	fillSource(t, src)
	if _, err := store.Copy(context.Background(), dst, src, store.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	v, _ := vault.New(masterKey)
	other, _ := vault.New(vault.NewKey())
	if err := dst.View(context.Background(), func(tx store.Tx) error {
		for ref, want := range map[string]string{"connection/weather/default": "s3cret-api-key", "connector/github/clientSecret": "gh-client-secret"} {
			if raw := tx.Get(vault.Bucket, ref); raw == nil || string(raw) == want {
				t.Errorf("%s: stored %q, want it sealed", ref, raw)
			}
			got, err := v.Get(tx, ref)
			if err != nil || string(got) != want {
				t.Errorf("%s opens to %q, %v; want %q", ref, got, err, want)
			}
			if _, err := other.Get(tx, ref); err == nil {
				t.Errorf("%s opens under another master key", ref)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func sameDump(t *testing.T, got, want dump) {
	t.Helper()
	for k, v := range want.keys {
		if g, ok := got.keys[k]; !ok || g != v {
			t.Errorf("%s = %q (present %v), want %q", k, g, ok, v)
		}
	}
	for k := range got.keys {
		if _, ok := want.keys[k]; !ok {
			t.Errorf("unexpected key %s", k)
		}
	}
	for b, n := range want.seqs {
		if got.seqs[b] != n {
			t.Errorf("sequence of %s = %d, want %d", b, got.seqs[b], n)
		}
	}
}

// countingStore records how many keys each Update transaction puts.
type countingStore struct {
	store.Store
	puts []int
}

type countingTx struct {
	store.Tx
	n *int
}

func (c countingTx) Put(bucket, key string, value []byte) error {
	*c.n++
	return c.Tx.Put(bucket, key, value)
}

func (c *countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	n := 0
	err := c.Store.Update(ctx, func(tx store.Tx) error {
		n = 0
		return fn(countingTx{Tx: tx, n: &n})
	})
	c.puts = append(c.puts, n)
	return err
}

func TestCopy_WritesInBoundedTransactions(t *testing.T) {
	tests := []struct {
		name    string
		opts    store.CopyOptions
		maxPuts int
	}{
		{name: "at most PageKeys keys per transaction", opts: store.CopyOptions{PageKeys: 4}, maxPuts: 4},
		{name: "at most PageBytes of values per transaction", opts: store.CopyOptions{PageBytes: 50}, maxPuts: 2},
		{name: "a value larger than PageBytes alone", opts: store.CopyOptions{PageBytes: 1}, maxPuts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := openCopyStore(t)
			fillSource(t, src)
			dst := &countingStore{Store: openCopyStore(t)}
			stats, err := store.Copy(context.Background(), dst, src, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, n := range dst.puts {
				if n > tt.maxPuts {
					t.Errorf("a transaction put %d keys, want at most %d", n, tt.maxPuts)
				}
				total += n
			}
			if total != stats.Keys() {
				t.Errorf("transactions put %d keys, stats count %d", total, stats.Keys())
			}
			sameDump(t, dumpStore(t, dst.Store), dumpStore(t, src))
		})
	}
}

func (c countingTx) Sequence(bucket string) (uint64, error) {
	return c.Tx.(store.Sequencer).Sequence(bucket)
}

func (c countingTx) SetSequence(bucket string, v uint64) error {
	return c.Tx.(store.Sequencer).SetSequence(bucket, v)
}

// Leases belong to the processes that took them, which are stopped.
func TestCopy_LeavesLeasesBehind(t *testing.T) {
	src, dst := openCopyStore(t), openCopyStore(t)
	update(t, src, func(tx store.Tx) error {
		if err := tx.Put("leases", "webhooks/lane/wh_1", []byte(`{"owner":"gone"}`)); err != nil {
			return err
		}
		return tx.Put("apikeys", "key_1", []byte(`{}`))
	})
	if _, err := store.Copy(context.Background(), dst, src, store.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = dst.View(context.Background(), func(tx store.Tx) error {
		if tx.Get("leases", "webhooks/lane/wh_1") != nil {
			t.Error("a lease was copied")
		}
		if tx.Get("apikeys", "key_1") == nil {
			t.Error("the key was not copied")
		}
		return nil
	})
}
