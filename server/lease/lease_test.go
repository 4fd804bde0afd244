package lease_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/lease"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store/storetest"
)

var ctx = context.Background()

// openStore is the store the replicas of a test share (bbolt here; the
// one place to point these tests at PostgreSQL).
func openStore(t *testing.T) store.Store { return storetest.Shared(t) }

// clock is a settable clock shared by the replicas of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func replicas(t *testing.T, s store.Store, c *clock, n int) []*lease.Manager {
	ms := make([]*lease.Manager, n)
	for i := range ms {
		ms[i] = lease.New(s, lease.Options{Owner: lease.NewOwner(), Now: c.Now})
	}
	return ms
}

func TestAcquire(t *testing.T) {
	const ttl = 10 * time.Second
	tests := []struct {
		name string
		// before runs on replicas a and b before b tries to acquire.
		before func(t *testing.T, a, b *lease.Manager, c *clock)
		want   bool
	}{
		{"a free lease is taken", func(*testing.T, *lease.Manager, *lease.Manager, *clock) {}, true},
		{"a lease another replica holds is refused", func(t *testing.T, a, _ *lease.Manager, _ *clock) {
			mustAcquire(t, a, "job", ttl, true)
		}, false},
		{"a lease another replica holds is refused until it expires", func(t *testing.T, a, _ *lease.Manager, c *clock) {
			mustAcquire(t, a, "job", ttl, true)
			c.Add(ttl - time.Millisecond)
		}, false},
		{"an expired lease is taken over", func(t *testing.T, a, _ *lease.Manager, c *clock) {
			mustAcquire(t, a, "job", ttl, true)
			c.Add(ttl)
		}, true},
		{"a released lease is taken at once", func(t *testing.T, a, _ *lease.Manager, _ *clock) {
			mustAcquire(t, a, "job", ttl, true)
			if err := a.Release(ctx, "job"); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"ReleaseAll frees every lease of the owner", func(t *testing.T, a, _ *lease.Manager, _ *clock) {
			mustAcquire(t, a, "other", ttl, true)
			mustAcquire(t, a, "job", ttl, true)
			if err := a.ReleaseAll(ctx); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"a renewed lease is refused past its first expiry", func(t *testing.T, a, _ *lease.Manager, c *clock) {
			mustAcquire(t, a, "job", ttl, true)
			c.Add(ttl / 2)
			if ok, err := a.Renew(ctx, "job", ttl); err != nil || !ok {
				t.Fatalf("Renew = %v, %v; want true", ok, err)
			}
			c.Add(ttl/2 + time.Second)
		}, false},
		{"the holder takes its own lease again", func(t *testing.T, _, b *lease.Manager, _ *clock) {
			mustAcquire(t, b, "job", ttl, true)
		}, true},
		{"releasing another owner's lease leaves it held", func(t *testing.T, a, b *lease.Manager, _ *clock) {
			mustAcquire(t, a, "job", ttl, true)
			if err := b.Release(ctx, "job"); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			ms := replicas(t, openStore(t), c, 2)
			tc.before(t, ms[0], ms[1], c)
			mustAcquire(t, ms[1], "job", ttl, tc.want)
		})
	}
}

func mustAcquire(t *testing.T, m *lease.Manager, name string, ttl time.Duration, want bool) {
	t.Helper()
	got, err := m.Acquire(ctx, name, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("%s: Acquire(%q) = %v, want %v", m.Owner(), name, got, want)
	}
}

func TestRenewAndHeld_AfterTakeoverTheOldHolderHasLostIt(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := openStore(t)
	ms := replicas(t, s, c, 2)
	a, b := ms[0], ms[1]
	mustAcquire(t, a, "lane", time.Second, true)
	c.Add(2 * time.Second)
	held := func(m *lease.Manager) bool {
		var h bool
		if err := s.View(ctx, func(tx store.Tx) error {
			var err error
			h, err = m.Held(tx, "lane")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return h
	}
	if !held(a) {
		t.Fatal("an expired lease nobody took is no longer held by its owner")
	}
	mustAcquire(t, b, "lane", time.Second, true)
	if held(a) || !held(b) {
		t.Fatalf("after takeover: held by a = %v, by b = %v; want false, true", held(a), held(b))
	}
	if ok, err := a.Renew(ctx, "lane", time.Second); err != nil || ok {
		t.Fatalf("Renew by the old holder = %v, %v; want false", ok, err)
	}
}

func TestAcquire_ConcurrentReplicasTakeALeaseOnce(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ms := replicas(t, openStore(t), c, 3)
	var (
		wg  sync.WaitGroup
		won atomic.Int32
	)
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := ms[i%3].Acquire(ctx, "job", time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	// The winner may take its own lease again: count the owners instead.
	owners := 0
	for _, m := range ms {
		if ok, _ := m.Acquire(ctx, "job", time.Minute); ok {
			owners++
		}
	}
	if owners != 1 {
		t.Fatalf("%d replicas hold the lease, want 1", owners)
	}
}

func TestJob_RunsOnOneReplicaAtATime(t *testing.T) {
	s := openStore(t)
	ms := replicas(t, s, &clock{t: time.Now()}, 3)
	// Real clock: the renewals matter here. Each replica calls the job in
	// a loop; while one runs it nobody else may.
	for i := range ms {
		ms[i] = lease.New(s, lease.Options{Owner: ms[i].Owner()})
	}
	var (
		running, maxRunning, runs atomic.Int32
		wg                        sync.WaitGroup
	)
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				_, err := m.Job(ctx, "prune", 50*time.Millisecond, func(context.Context) error {
					n := running.Add(1)
					for {
						old := maxRunning.Load()
						if n <= old || maxRunning.CompareAndSwap(old, n) {
							break
						}
					}
					runs.Add(1)
					time.Sleep(time.Millisecond)
					running.Add(-1)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if maxRunning.Load() != 1 || runs.Load() == 0 {
		t.Fatalf("job ran %d times with up to %d at once; want runs and 1 at a time", runs.Load(), maxRunning.Load())
	}
}

func TestJob_OtherReplicasSkipItUntilTheHolderReleasesIt(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ms := replicas(t, openStore(t), c, 2)
	a, b := ms[0], ms[1]
	run := func(m *lease.Manager) bool {
		ran, err := m.Job(ctx, "prune", time.Minute, func(context.Context) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return ran
	}
	steps := []struct {
		name string
		do   func() bool
		want bool
	}{
		{"the first replica runs the job", func() bool { return run(a) }, true},
		{"another replica skips it while the lease lasts", func() bool { return run(b) }, false},
		{"the holder runs it again", func() bool { return run(a) }, true},
		{"another replica runs it once the holder released its leases", func() bool {
			if err := a.ReleaseAll(ctx); err != nil {
				t.Fatal(err)
			}
			return run(b)
		}, true},
		{"another replica runs it once the lease expired", func() bool { c.Add(time.Minute); return run(a) }, true},
	}
	for _, st := range steps {
		if got := st.do(); got != st.want {
			t.Fatalf("%s: ran = %v, want %v", st.name, got, st.want)
		}
	}
}
