package webhooks_test

// Delivery across replicas: several Services ("replicas", each with its
// own lease owner) share one store and deliver to real receivers.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/lease"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store/storetest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks/webhooktest"
)

// openStore is the store the replicas of a test share (bbolt here; the
// one place to point these tests at PostgreSQL).
func openStore(t *testing.T) store.Store { return storetest.Shared(t) }

// mortalStore is one replica's connection to the shared store; kill makes
// every later transaction fail, as when the replica's process dies.
type mortalStore struct {
	store.Store
	dead atomic.Bool
}

var errDead = errors.New("replica is dead")

func (m *mortalStore) View(ctx context.Context, fn func(store.Tx) error) error {
	if m.dead.Load() {
		return errDead
	}
	return m.Store.View(ctx, fn)
}

func (m *mortalStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if m.dead.Load() {
		return errDead
	}
	return m.Store.Update(ctx, fn)
}

type replica struct {
	svc *webhooks.Service
	st  *mortalStore
}

// record records one event through this replica.
func (r replica) record(t *testing.T, n int) {
	t.Helper()
	if err := r.st.Update(ctx, func(tx store.Tx) error {
		return r.svc.Record(tx, events.ConnectorCreated, map[string]any{"n": n})
	}); err != nil {
		t.Fatal(err)
	}
}

// newReplicas builds n Services over one shared store, not started.
func newReplicas(t *testing.T, n int, leaseTTL time.Duration) []replica {
	t.Helper()
	shared := openStore(t)
	key := vault.NewKey()
	g, err := egress.New([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Webhooks{AttemptTimeout: config.Duration(2 * time.Second)}
	for range 20 {
		cfg.RetrySchedule = append(cfg.RetrySchedule, config.Duration(20*time.Millisecond))
	}
	rs := make([]replica, n)
	for i := range rs {
		v, err := vault.New(key)
		if err != nil {
			t.Fatal(err)
		}
		st := &mortalStore{Store: shared}
		rs[i] = replica{st: st, svc: webhooks.New(webhooks.Options{
			Store: st, Vault: v, Config: cfg, Guard: g, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Leases: lease.New(st, lease.Options{Owner: lease.NewOwner()}), LeaseTTL: leaseTTL, Poll: 10 * time.Millisecond,
		})}
		t.Cleanup(func() {
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_ = rs[i].svc.Close(c)
		})
	}
	return rs
}

// hook creates a webhook for a new receiver through r.
func hook(t *testing.T, r replica) (webhooks.Webhook, *webhooktest.Receiver) {
	t.Helper()
	rcv := webhooktest.New(t)
	w, secret, err := r.svc.Create(ctx, webhooks.Input{URL: rcv.URL(), Events: []string{events.ConnectorCreated}})
	if err != nil {
		t.Fatal(err)
	}
	rcv.Expect(secret)
	return w, rcv
}

// recordedIDs lists the recorded events, oldest first.
func recordedIDs(t *testing.T, s *webhooks.Service) []string {
	t.Helper()
	var ids []string
	for _, e := range allEvents(t, s) {
		ids = append(ids, e.ID)
	}
	return ids
}

// allSucceeded waits until no delivery of w is pending and checks that every
// one succeeded.
func allSucceeded(t *testing.T, s *webhooks.Service, w webhooks.Webhook, n int) []webhooks.Delivery {
	t.Helper()
	var ds []webhooks.Delivery
	webhooktest.WaitFor(t, "every delivery recorded as succeeded", 60*time.Second, func() bool {
		var err error
		ds, _, err = s.ListDeliveries(ctx, w.ID, webhooks.DeliveryQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(ds) == n && !slices.ContainsFunc(ds, func(d webhooks.Delivery) bool { return d.Status != webhooks.StatusSucceeded })
	})
	return ds
}

func TestReplicas_EveryEventDeliveredOnceInOrder(t *testing.T) {
	const perWebhook = 60
	rs := newReplicas(t, 3, 10*time.Second)
	w1, rcv1 := hook(t, rs[0])
	w2, rcv2 := hook(t, rs[1])
	for _, r := range rs {
		r.svc.Start()
	}
	// Events recorded through every replica, round robin: most of them
	// for a lane another replica runs.
	for i := range perWebhook {
		rs[i%3].record(t, i)
	}
	want := recordedIDs(t, rs[2].svc)
	for _, tc := range []struct {
		name string
		w    webhooks.Webhook
		rcv  *webhooktest.Receiver
	}{{"first webhook", w1, rcv1}, {"second webhook", w2, rcv2}} {
		t.Run(tc.name+" receives every event once, in order", func(t *testing.T) {
			ds := allSucceeded(t, rs[2].svc, tc.w, perWebhook)
			tc.rcv.CheckClean(t)
			var got []string
			for _, g := range tc.rcv.Received() {
				got = append(got, g.ID)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("receiver got %d requests, want each of the %d events once, in order (first difference at %d)", len(got), len(want), firstDiff(got, want))
			}
			for _, d := range ds {
				if d.Attempts != 1 {
					t.Errorf("delivery %s made %d attempts, want 1", d.ID, d.Attempts)
				}
			}
		})
	}
}

func TestReplicas_AnotherReplicaTakesOverTheDeliveries(t *testing.T) {
	const n = 15
	tests := []struct {
		name string
		// leaseTTL is long when the takeover must not wait for an expiry.
		leaseTTL time.Duration
		stop     func(t *testing.T, r replica)
	}{
		{"of a replica that died mid-delivery, once its lease expired", 500 * time.Millisecond, func(_ *testing.T, r replica) {
			r.st.dead.Store(true)
		}},
		{"of a replica that closed, at once", time.Hour, func(t *testing.T, r replica) {
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := r.svc.Close(c); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := newReplicas(t, 2, tc.leaseTTL)
			a, b := rs[0], rs[1]
			w, rcv := hook(t, a)
			rcv.SetDelay(50 * time.Millisecond)
			for i := range n {
				a.record(t, i)
			}
			want := recordedIDs(t, a.svc)
			a.svc.Start()
			webhooktest.WaitFor(t, "the first replica delivering", 30*time.Second, func() bool { return len(rcv.Received()) >= 2 })
			tc.stop(t, a)
			b.svc.Start()
			allSucceeded(t, b.svc, w, n)
			rcv.CheckClean(t)
			got := rcv.Delivered()
			for _, id := range want {
				if _, ok := got[id]; !ok {
					t.Errorf("event %s never delivered", id)
				}
			}
		})
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
