package responses_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ids"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/lease"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/pgtest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/responses"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

var bg = context.Background()

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func newClock() *clock               { return &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)} }
func quiet() *slog.Logger            { return slog.New(slog.DiscardHandler) }
func stored(id, owner string) *responses.Stored {
	return &responses.Stored{ID: id, Owner: owner, Input: json.RawMessage(`[]`), Response: json.RawMessage(`{"id":"` + id + `"}`)}
}

// countingStore counts Update transactions and can be made to fail.
type countingStore struct {
	store.Store
	updates atomic.Int32
	fail    atomic.Bool
}

func (c *countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	c.updates.Add(1)
	if c.fail.Load() {
		return errors.New("disk on fire")
	}
	return c.Store.Update(ctx, fn)
}

// backends run each test on every store backend.
var backends = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"bbolt", func(t *testing.T) store.Store {
		s, err := store.OpenBolt(filepath.Join(t.TempDir(), "r.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"postgres", func(t *testing.T) store.Store {
		s, err := store.OpenPostgres(bg, pgtest.NewDatabase(t), store.PostgresOptions{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

func forEachBackend(t *testing.T, fn func(t *testing.T, st *countingStore)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, &countingStore{Store: b.open(t)}) })
	}
}

// keeper starts a Keeper that flushes only when told (a long interval).
func keeper(t *testing.T, st store.Store, c *clock, o responses.Options) *responses.Keeper {
	o.Now, o.Logger, o.FlushInterval = c.now, quiet(), time.Hour
	k := responses.New(st, o)
	t.Cleanup(func() { _ = k.Close(bg) })
	return k
}

// keys lists the keys of the responses bucket.
func keys(t *testing.T, st store.Store) []string {
	t.Helper()
	var out []string
	if err := st.View(bg, func(tx store.Tx) error {
		return tx.Scan(responses.Bucket, "", "", func(k string, _ []byte) (bool, error) {
			out = append(out, k)
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestKeeper_PutWritesNothingUntilFlushAndIsServedEitherWay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st *countingStore) {
		c := newClock()
		k := keeper(t, st, c, responses.Options{})
		k.Put(stored("resp_1", "key_a"))
		if n := st.updates.Load(); n != 0 {
			t.Fatalf("Put wrote %d transactions", n)
		}
		for _, flushed := range []bool{false, true} {
			if flushed {
				if err := k.Flush(bg); err != nil {
					t.Fatal(err)
				}
				if want := []string{"b/resp_1", "r/resp_1", "x/20261225T120000Z/resp_1"}; !slices.Equal(keys(t, st), want) {
					t.Fatalf("stored keys %v, want %v (its block, its location, the block's expiry entry)", keys(t, st), want)
				}
			}
			s, err := k.Get(bg, "key_a", "resp_1")
			if err != nil || string(s.Response) != `{"id":"resp_1"}` || !s.ExpiresAt.Equal(c.now().Add(responses.DefaultRetention)) {
				t.Fatalf("flushed %v: %v %+v", flushed, err, s)
			}
			if _, err := k.Get(bg, "key_b", "resp_1"); errs.KindOf(err) != errs.NotFound {
				t.Errorf("flushed %v: another owner got %v", flushed, err)
			}
		}
		if _, err := k.Get(bg, "key_a", "resp_none"); errs.KindOf(err) != errs.NotFound {
			t.Errorf("unknown id: %v", err)
		}
	})
}

func TestKeeper_ExpiredResponsesAreNotServedAndAreSwept(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st *countingStore) {
		c := newClock()
		k := keeper(t, st, c, responses.Options{Retention: time.Hour, Leases: lease.New(st, lease.Options{Now: c.now})})
		k.Put(stored("resp_old", "key_a"))
		if err := k.Flush(bg); err != nil {
			t.Fatal(err)
		}
		c.add(30 * time.Minute)
		k.Put(stored("resp_new", "key_a"))
		c.add(31 * time.Minute) // resp_old expired; resp_new has 29 minutes left
		if _, err := k.Get(bg, "key_a", "resp_old"); errs.KindOf(err) != errs.NotFound {
			t.Fatalf("expired: %v", err)
		}
		c.add(responses.SweepEvery) // the next flush sweeps
		k.Put(stored("resp_newest", "key_a"))
		if err := k.Flush(bg); err != nil {
			t.Fatal(err)
		}
		if got := keys(t, st); len(got) != 3 || got[1] != "r/resp_newest" {
			t.Errorf("after the sweep: %v", got)
		}
	})
}

func TestKeeper_SweepIsBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st *countingStore) {
		c := newClock()
		k := keeper(t, st, c, responses.Options{Retention: time.Minute})
		for i := range 1005 {
			k.Put(stored(fmt.Sprintf("resp_%04d", i), "key_a"))
			if i%200 == 199 { // below the pending count that wakes the background flusher
				if err := k.Flush(bg); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := k.Flush(bg); err != nil {
			t.Fatal(err)
		}
		c.add(2 * responses.SweepEvery)
		if err := k.Flush(bg); err != nil {
			t.Fatal(err)
		}
		// Five flushes of 200 wrote four blocks each (64, 64, 64, 8), the
		// last flush one of 5: the sweep stops at that one, having deleted
		// 1,000, and leaves its block, 5 locations and its expiry entry.
		if n := len(keys(t, st)); n != 1+5+1 {
			t.Fatalf("after one sweep %d keys, want 7: %v", n, keys(t, st))
		}
		if err := k.Flush(bg); err != nil { // the sweep was not finished: it goes on
			t.Fatal(err)
		}
		if n := len(keys(t, st)); n != 0 {
			t.Fatalf("after two sweeps %d keys", n)
		}
	})
}

func TestKeeper_FailedFlushKeepsResponses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st *countingStore) {
		c := newClock()
		k := keeper(t, st, c, responses.Options{})
		k.Put(stored("resp_1", "key_a"))
		st.fail.Store(true)
		if err := k.Flush(bg); err == nil {
			t.Fatal("flush did not fail")
		}
		if _, err := k.Get(bg, "key_a", "resp_1"); err != nil {
			t.Fatalf("after a failed flush: %v", err)
		}
		st.fail.Store(false)
		k.Put(stored("resp_2", "key_a"))
		if err := k.Flush(bg); err != nil {
			t.Fatal(err)
		}
		if n := len(keys(t, st)); n != 1+2+1 { // one block of two, their locations, its expiry entry
			t.Errorf("stored %v", keys(t, st))
		}
	})
}

func TestKeeper_Delete(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flushed bool
	}{{"waiting", false}, {"stored", true}} {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, st *countingStore) {
				c := newClock()
				k := keeper(t, st, c, responses.Options{})
				k.Put(stored("resp_1", "key_a"))
				if tc.flushed {
					if err := k.Flush(bg); err != nil {
						t.Fatal(err)
					}
				}
				if err := k.Delete(bg, "key_b", "resp_1"); errs.KindOf(err) != errs.NotFound {
					t.Fatalf("another owner deleted: %v", err)
				}
				if err := k.Delete(bg, "key_a", "resp_1"); err != nil {
					t.Fatal(err)
				}
				if err := k.Flush(bg); err != nil {
					t.Fatal(err)
				}
				if _, err := k.Get(bg, "key_a", "resp_1"); errs.KindOf(err) != errs.NotFound {
					t.Errorf("after delete: %v", err)
				}
				got := keys(t, st)
				if want := map[bool]int{false: 0, true: 2}[tc.flushed]; len(got) != want {
					t.Fatalf("stored %v, want %d keys", got, want)
				}
				if tc.flushed {
					// The block stays until its expiry, the response blanked in it.
					if err := st.View(bg, func(tx store.Tx) error {
						b, err := s2.Decode(nil, tx.Get(responses.Bucket, got[0]))
						if !strings.HasPrefix(got[0], "b/") || err != nil || len(b) == 0 || strings.Trim(string(b), "\x00") != "" {
							t.Errorf("%s after the delete: %q %v", got[0], b, err)
						}
						return nil
					}); err != nil {
						t.Fatal(err)
					}
				}
				// The sweep takes the entry of an id already deleted.
				c.add(responses.DefaultRetention + responses.SweepEvery)
				if err := k.Flush(bg); err != nil {
					t.Fatal(err)
				}
				if got := keys(t, st); len(got) != 0 {
					t.Errorf("after the sweep: %v", got)
				}
			})
		})
	}
}

func TestKeeper_CloseFlushesForTheNextProcessAndOtherReplicas(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st *countingStore) {
		c := newClock()
		a := responses.New(st, responses.Options{Now: c.now, Logger: quiet(), FlushInterval: time.Hour})
		b := keeper(t, st, c, responses.Options{})
		a.Put(stored("resp_1", "key_a"))
		if _, err := b.Get(bg, "key_a", "resp_1"); errs.KindOf(err) != errs.NotFound {
			t.Fatalf("another replica before the flush: %v", err)
		}
		if err := a.Close(bg); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Get(bg, "key_a", "resp_1"); err != nil {
			t.Fatalf("another replica after close: %v", err)
		}
	})
}

func TestKeeper_TooManyWaitingDropsTheOldest(t *testing.T) {
	c := newClock()
	st := &countingStore{Store: backends[0].open(t)}
	k := keeper(t, st, c, responses.Options{MaxPending: 3})
	for i := range 5 {
		k.Put(stored(fmt.Sprintf("resp_%d", i), "key_a"))
	}
	for i := range 5 {
		_, err := k.Get(bg, "key_a", fmt.Sprintf("resp_%d", i))
		if kept := i >= 2; kept != (err == nil) {
			t.Errorf("resp_%d: %v", i, err)
		}
	}
}

func TestKeeper_BackgroundFlush(t *testing.T) {
	c := newClock()
	st := &countingStore{Store: backends[0].open(t)}
	k := responses.New(st, responses.Options{Now: c.now, Logger: quiet(), FlushInterval: 10 * time.Millisecond})
	t.Cleanup(func() { _ = k.Close(bg) })
	k.Put(stored("resp_1", "key_a"))
	deadline := time.Now().Add(5 * time.Second)
	for len(keys(t, st)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the background flusher wrote nothing")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestKeeper_SweepTakesEntriesOfEarlierVersions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st *countingStore) {
		c := newClock()
		k := keeper(t, st, c, responses.Options{Retention: time.Hour})
		// Before expiry entries listed a flush's ids, each response had its
		// own, empty, naming the id in its key.
		expiry := c.now().Add(time.Hour).Format("20060102T150405Z")
		if err := st.Update(bg, func(tx store.Tx) error {
			if err := tx.Put(responses.Bucket, "r/resp_legacy", []byte(`{"id":"resp_legacy","owner":"key_a","expiresAt":"`+c.now().Add(time.Hour).Format(time.RFC3339)+`"}`)); err != nil {
				return err
			}
			return tx.Put(responses.Bucket, "x/"+expiry+"/resp_legacy", []byte{})
		}); err != nil {
			t.Fatal(err)
		}
		if s, err := k.Get(bg, "key_a", "resp_legacy"); err != nil || s.ID != "resp_legacy" {
			t.Fatalf("a response of an earlier version: %v %+v", err, s)
		}
		k.Put(stored("resp_1", "key_a"))
		c.add(2 * time.Hour)
		if err := k.Flush(bg); err != nil { // resp_1 expired while waiting: not written
			t.Fatal(err)
		}
		if got := keys(t, st); len(got) != 0 {
			t.Errorf("after the sweep: %v", got)
		}
	})
}

func TestKeeper_BlocksOfManyResponses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st *countingStore) {
		c := newClock()
		k := keeper(t, st, c, responses.Options{})
		const n = 150 // three blocks: 64, 64, 22
		for i := range n {
			k.Put(stored(fmt.Sprintf("resp_%03d", i), "key_a"))
		}
		if err := k.Flush(bg); err != nil {
			t.Fatal(err)
		}
		if err := k.Delete(bg, "key_a", "resp_070"); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			id := fmt.Sprintf("resp_%03d", i)
			s, err := k.Get(bg, "key_a", id)
			if i == 70 {
				if errs.KindOf(err) != errs.NotFound {
					t.Errorf("%s after its delete: %v", id, err)
				}
				continue
			}
			if err != nil || string(s.Response) != `{"id":"`+id+`"}` {
				t.Fatalf("%s: %v %+v", id, err, s)
			}
		}
		var blocks int
		for _, key := range keys(t, st) {
			if strings.HasPrefix(key, "b/") {
				blocks++
			}
		}
		if blocks != 3 {
			t.Errorf("%d blocks: %v", blocks, keys(t, st))
		}
	})
}

// idTime is later than every id made so far: server/ids keeps ids
// increasing, so that ids made at an earlier time would all take the
// latest id's millisecond.
var idTime = time.Now()

func TestKeeper_IndexByWindow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st *countingStore) {
		c := newClock()
		k := keeper(t, st, c, responses.Options{})
		// 150 ids of server/ids made 1 ms apart (three blocks: 64, 64,
		// 22), and one not made by server/ids, in the second block.
		idTime = idTime.Add(time.Hour).Truncate(16 * time.Millisecond) // windows start at put[0], put[16], ...
		start := idTime
		var put []string
		for i := range 150 {
			id := ids.New("resp_", start.Add(time.Duration(i)*time.Millisecond))
			if i == 100 {
				id = "resp_foreign"
			}
			put = append(put, id)
			k.Put(stored(id, "key_a"))
		}
		if err := k.Flush(bg); err != nil {
			t.Fatal(err)
		}
		// The layout of the bucket's doc: a block's responses are listed
		// under "i/<window>/<block>", a window being an id's prefix and
		// its first 11 hex digits of milliseconds; the foreign id under
		// "r/<id>".
		want := map[string]bool{"r/resp_foreign": true}
		for b := 0; b < len(put); b += 64 {
			first := put[b]
			want["b/"+first] = true
			for _, id := range put[b:min(b+64, len(put))] {
				if id != "resp_foreign" {
					want["i/"+id[:len("resp_")+11]+"/"+first] = true
				}
			}
		}
		got := keys(t, st)
		var index []string
		for _, key := range got {
			switch {
			case strings.HasPrefix(key, "x/"):
			case !want[key]:
				t.Errorf("unexpected key %s", key)
			case strings.HasPrefix(key, "i/"):
				index = append(index, key)
			}
		}
		// 150 ms of ids: about ten windows, split where blocks end.
		if len(got) != len(want)+3 || len(index) > 14 {
			t.Errorf("%d keys (%d index entries), want %d and 3 expiry entries: %v", len(got), len(index), len(want), got)
		}
		// Deleting responses rewrites their entries; the last one of an
		// entry takes it away.
		gone := map[string]bool{put[1]: true, put[100]: true}
		for _, id := range put[16:32] { // a whole window of the first block
			gone[id] = true
		}
		for id := range gone {
			if err := k.Delete(bg, "key_a", id); err != nil {
				t.Fatalf("delete %s: %v", id, err)
			}
		}
		for _, id := range put {
			s, err := k.Get(bg, "key_a", id)
			switch {
			case gone[id] && errs.KindOf(err) != errs.NotFound:
				t.Errorf("%s after its delete: %v", id, err)
			case !gone[id] && (err != nil || string(s.Response) != `{"id":"`+id+`"}`):
				t.Errorf("%s: %v %+v", id, err, s)
			}
		}
		if slices.Contains(keys(t, st), "r/resp_foreign") || slices.Contains(keys(t, st), "i/"+put[16][:len("resp_")+11]+"/"+put[0]) {
			t.Errorf("entries of deleted responses are left: %v", keys(t, st))
		}
		// The sweep takes everything once it expired.
		c.add(responses.DefaultRetention + responses.SweepEvery)
		if err := k.Flush(bg); err != nil {
			t.Fatal(err)
		}
		if got := keys(t, st); len(got) != 0 {
			t.Errorf("after the sweep: %v", got)
		}
	})
}
