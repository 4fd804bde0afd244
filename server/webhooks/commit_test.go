package webhooks

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/lease"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// The retry and disable rules, applied to crafted attempt outcomes at
// chosen times (deterministic; the worker is not running).
func TestCommitRules(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := vault.New(vault.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	sched := []config.Duration{config.Duration(time.Minute), config.Duration(time.Hour)}
	s := New(Options{Store: st, Vault: v, Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Config: config.Webhooks{RetrySchedule: sched, DisableAfter: config.Duration(48 * time.Hour)}})
	w, _, err := s.Create(ctx, Input{URL: "https://hooks.example.com/x", Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	var ds []Delivery
	if err := st.Update(ctx, func(tx store.Tx) error {
		for range 3 {
			_, d, err := s.record(tx, events.ConnectorCreated, map[string]any{"n": 1}, "")
			if err != nil {
				return err
			}
			ds = append(ds, d[0])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	get := func(d Delivery) Delivery {
		t.Helper()
		g, err := s.GetDelivery(ctx, w.ID, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	fail := func(d Delivery, at time.Time) {
		t.Helper()
		it := pendingItem{d: get(d), key: outboxKey(w.ID, strings.TrimPrefix(d.ID, deliveryPrefix)), body: []byte("{}")}
		if _, err := s.leases.Acquire(ctx, laneLease(w.ID), time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.commit(w.ID, []outcome{{item: it, at: at, code: 500, err: "receiver answered 500; want 2xx"}}); err != nil {
			t.Fatal(err)
		}
	}
	succeed := func(d Delivery, at time.Time) {
		t.Helper()
		it := pendingItem{d: get(d), key: outboxKey(w.ID, strings.TrimPrefix(d.ID, deliveryPrefix)), body: []byte("{}")}
		if _, err := s.leases.Acquire(ctx, laneLease(w.ID), time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.commit(w.ID, []outcome{{item: it, at: at, ok: true, code: 200}}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("retried on the schedule with jitter, then failed", func(t *testing.T) {
		fail(ds[0], t0)
		d := get(ds[0])
		if d.Status != StatusPending || d.NextAttemptAt == nil || d.NextAttemptAt.Before(t0.Add(48*time.Second)) || d.NextAttemptAt.After(t0.Add(72*time.Second)) {
			t.Fatalf("after 1 failure: %+v", d)
		}
		fail(ds[0], t0.Add(time.Minute))
		if d = get(ds[0]); d.Status != StatusPending || d.NextAttemptAt.Sub(t0.Add(time.Minute)) < 48*time.Minute {
			t.Fatalf("after 2 failures: %+v", d)
		}
		fail(ds[0], t0.Add(61*time.Minute))
		if d = get(ds[0]); d.Status != StatusFailed || d.Attempts != 3 || d.NextAttemptAt != nil || d.LastResponseCode != 500 {
			t.Fatalf("after 3 failures: %+v", d)
		}
	})
	t.Run("a delivery blocked past its schedule gets one attempt", func(t *testing.T) {
		// Its run started at t0; the schedule (61 min + 25%) is over.
		fail(ds[1], t0.Add(2*time.Hour))
		if d := get(ds[1]); d.Status != StatusFailed || d.Attempts != 1 {
			t.Fatalf("blocked delivery: %+v", d)
		}
	})
	t.Run("failing continuously disables the webhook; a success resets", func(t *testing.T) {
		got, _ := s.Get(ctx, w.ID)
		if got.FailingSince == nil || !got.FailingSince.Equal(t0) || !got.Enabled {
			t.Fatalf("failing webhook: %+v", got)
		}
		succeed(ds[2], t0.Add(3*time.Hour))
		if got, _ = s.Get(ctx, w.ID); got.FailingSince != nil {
			t.Fatalf("a success did not reset failingSince: %+v", got)
		}
		// A fresh failure streak: disabled once it lasts 48h.
		if err := st.Update(ctx, func(tx store.Tx) error {
			_, d, err := s.record(tx, events.ConnectorCreated, map[string]any{"n": 2}, "")
			ds = append(ds, d[0])
			return err
		}); err != nil {
			t.Fatal(err)
		}
		fail(ds[3], t0.Add(4*time.Hour))
		fail(ds[3], t0.Add(51*time.Hour)) // 47h into the streak
		if got, _ = s.Get(ctx, w.ID); !got.Enabled {
			t.Fatalf("disabled too early: %+v", got)
		}
		if err := st.Update(ctx, func(tx store.Tx) error {
			// A manual retry keeps the delivery going past its schedule.
			d := get(ds[3])
			d.Status, d.RunStartedAt, d.RunAttempts = StatusPending, t0.Add(51*time.Hour), 0
			return putDelivery(tx, d)
		}); err != nil {
			t.Fatal(err)
		}
		fail(ds[3], t0.Add(52*time.Hour))
		got, _ = s.Get(ctx, w.ID)
		if got.Enabled || got.DisabledAt == nil || !got.DisabledAt.Equal(t0.Add(52*time.Hour)) ||
			!strings.Contains(got.DisabledReason, "500") || got.Version != 2 {
			t.Fatalf("not disabled after 48h of failures: %+v", got)
		}
		// Disabling changes subscriptions: no new deliveries for it.
		if err := st.Update(ctx, func(tx store.Tx) error {
			_, d, err := s.record(tx, events.ConnectorCreated, map[string]any{"n": 3}, "")
			if err == nil && len(d) != 0 {
				t.Errorf("a disabled webhook got a delivery")
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCommit_RefusedWithoutTheLaneLease: a replica whose lane lease went to
// another replica (it was paused past the expiry) records nothing.
func TestCommit_RefusedWithoutTheLaneLease(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := vault.New(vault.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Store: st, Vault: v, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	w, _, err := s.Create(ctx, Input{URL: "https://hooks.example.com/x", Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	var d Delivery
	if err := st.Update(ctx, func(tx store.Tx) error {
		_, ds, err := s.record(tx, events.ConnectorCreated, map[string]any{"n": 1}, "")
		d = ds[0]
		return err
	}); err != nil {
		t.Fatal(err)
	}
	other := lease.New(st, lease.Options{})
	for _, tc := range []struct {
		name   string
		before func() error
	}{
		{"never held", func() error { return nil }},
		{"taken over by another replica", func() error {
			if _, err := s.leases.Acquire(ctx, laneLease(w.ID), time.Nanosecond); err != nil {
				return err
			}
			time.Sleep(time.Millisecond)
			ok, err := other.Acquire(ctx, laneLease(w.ID), time.Hour)
			if err == nil && !ok {
				err = errors.New("the expired lease was not taken over")
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.before(); err != nil {
				t.Fatal(err)
			}
			it := pendingItem{d: d, key: outboxKey(w.ID, strings.TrimPrefix(d.ID, deliveryPrefix)), body: []byte("{}")}
			if err := s.commit(w.ID, []outcome{{item: it, at: time.Now(), ok: true, code: 200}}); !errors.Is(err, errLeaseLost) {
				t.Fatalf("commit = %v, want errLeaseLost", err)
			}
			got, err := s.GetDelivery(ctx, w.ID, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != StatusPending || got.Attempts != 0 {
				t.Fatalf("delivery after a refused commit: %s with %d attempts, want pending with 0", got.Status, got.Attempts)
			}
		})
	}
}
