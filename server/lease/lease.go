// Package lease gives the replicas sharing one store named, expiring
// leases, so that a piece of background work (a webhook's delivery lane, a
// housekeeping job) runs on one replica at a time and is taken over by
// another once the replica holding it stops renewing it.
//
// A lease is a record in the store's "leases" bucket, {owner, until},
// written in an Update transaction. Acquire takes a lease that is free,
// expired or already the caller's; every replica's Update transactions are
// serializable, so two replicas can never both take the same lease. An
// owner is a random id per process (NewOwner); the server makes one at
// start and hands it to every Manager it builds.
//
// A lease only says who may do the work; the work's writes check it again
// inside their own transaction (Held), so that a replica that was paused
// past its lease's expiry (and lost it to another) cannot record results
// over the new holder's.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// Bucket holds the leases, keyed by name (declared in store.Buckets).
const Bucket = "leases"

// record is a lease as stored.
type record struct {
	Owner string    `json:"owner"`
	Until time.Time `json:"until"`
}

// NewOwner returns a fresh random owner id (one per process).
func NewOwner() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Manager takes, renews and releases leases for one owner.
type Manager struct {
	store store.Store
	owner string
	now   func() time.Time
}

// Options configure a Manager.
type Options struct {
	// Owner is this replica's id; NewOwner's when empty.
	Owner string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// New returns a Manager over s.
func New(s store.Store, o Options) *Manager {
	if o.Owner == "" {
		o.Owner = NewOwner()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Manager{store: s, owner: o.Owner, now: o.Now}
}

// Owner returns the owner id the Manager takes leases for.
func (m *Manager) Owner() string { return m.owner }

func get(tx store.Tx, name string) (record, bool, error) {
	v := tx.Get(Bucket, name)
	if v == nil {
		return record{}, false, nil
	}
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return record{}, false, fmt.Errorf("decode lease %q: %w", name, err)
	}
	return r, true, nil
}

// Acquire takes the lease name for ttl from now when it is free, expired
// or already this owner's (then it is renewed); false when another owner
// holds it. It fails only when the store does.
func (m *Manager) Acquire(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	got := false
	err := m.store.Update(ctx, func(tx store.Tx) error {
		var err error
		got, err = m.AcquireTx(tx, name, ttl)
		return err
	})
	return got && err == nil, err
}

// AcquireTx is Acquire inside the caller's write transaction.
func (m *Manager) AcquireTx(tx store.Tx, name string, ttl time.Duration) (bool, error) {
	now := m.now().UTC()
	r, ok, err := get(tx, name)
	if err != nil {
		return false, err
	}
	if ok && r.Owner != m.owner && now.Before(r.Until) {
		return false, nil
	}
	return true, store.PutJSON(tx, Bucket, name, record{Owner: m.owner, Until: now.Add(ttl)})
}

// Renew extends a lease this owner holds to ttl from now; false when it
// has been released or another owner took it after it expired (the caller
// must stop the work). A lease that expired without being taken is this
// owner's still and is renewed.
func (m *Manager) Renew(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	held := false
	err := m.store.Update(ctx, func(tx store.Tx) error {
		held = false // a run that failed after renewing may have set it
		r, ok, err := get(tx, name)
		if err != nil || !ok || r.Owner != m.owner {
			return err
		}
		held = true
		return store.PutJSON(tx, Bucket, name, record{Owner: m.owner, Until: m.now().UTC().Add(ttl)})
	})
	return held && err == nil, err
}

// Held reports, inside a transaction, whether this owner holds the lease
// name: the check a write made under a lease runs in its own transaction.
// A lease that expired but that nobody took since is still held: nobody
// else can have done the work meanwhile.
func (m *Manager) Held(tx store.Tx, name string) (bool, error) {
	r, ok, err := get(tx, name)
	return ok && r.Owner == m.owner, err
}

// Free reports, inside a transaction, whether Acquire of name would
// succeed now (free, expired or this owner's): for deciding cheaply, in a
// read transaction, which work to try.
func (m *Manager) Free(tx store.Tx, name string) (bool, error) {
	r, ok, err := get(tx, name)
	return !ok || r.Owner == m.owner || !m.now().Before(r.Until), err
}

// Release gives up the lease name if this owner holds it, so that another
// replica may take it at once.
func (m *Manager) Release(ctx context.Context, name string) error {
	return m.store.Update(ctx, func(tx store.Tx) error {
		r, ok, err := get(tx, name)
		if err != nil || !ok || r.Owner != m.owner {
			return err
		}
		return tx.Delete(Bucket, name)
	})
}

// ReleaseAll gives up every lease this owner holds (at shutdown).
func (m *Manager) ReleaseAll(ctx context.Context) error {
	return m.store.Update(ctx, func(tx store.Tx) error {
		var mine []string
		if err := tx.Scan(Bucket, "", "", func(k string, v []byte) (bool, error) {
			var r record
			if json.Unmarshal(v, &r) == nil && r.Owner == m.owner {
				mine = append(mine, k)
			}
			return true, nil
		}); err != nil {
			return err
		}
		for _, k := range mine {
			if err := tx.Delete(Bucket, k); err != nil {
				return err
			}
		}
		return nil
	})
}

// Job runs fn under the lease name, when this owner can take it: a job
// that one replica at a time should run (pruning, retention). The lease is
// renewed every ttl/3 while fn runs (fn's context ends if that fails) and
// kept after it returns, until it expires: a job called every ttl on
// every replica thus runs once per ttl across them, on the replica that
// holds the lease, and moves to another when that one stops (Close
// releases it) or dies (it expires). ran is false when another owner
// holds the lease.
func (m *Manager) Job(ctx context.Context, name string, ttl time.Duration, fn func(context.Context) error) (ran bool, err error) {
	got, err := m.Acquire(ctx, name, ttl)
	if err != nil || !got {
		return false, err
	}
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(max(ttl/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if held, err := m.Renew(jctx, name, ttl); err != nil || !held {
					cancel()
					return
				}
			}
		}
	}()
	err = fn(jctx)
	close(done)
	<-renewed
	return true, err
}
