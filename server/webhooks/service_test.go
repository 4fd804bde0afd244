package webhooks_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks/webhooktest"
)

// clock is a settable clock for the Service.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newService builds a Service over a fresh bbolt store, loopback allowed.
func newService(t *testing.T, cfg config.Webhooks, now func() time.Time) (*webhooks.Service, store.Store) {
	t.Helper()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(vault.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	g, err := egress.New([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	s := webhooks.New(webhooks.Options{Store: st, Vault: v, Config: cfg, Guard: g, Now: now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() {
		_ = s.Close(ctx)
		_ = st.Close()
	})
	return s, st
}

func record(t *testing.T, s *webhooks.Service, st store.Store, typ string, data any) {
	t.Helper()
	if err := st.Update(ctx, func(tx store.Tx) error { return s.Record(tx, typ, data) }); err != nil {
		t.Fatal(err)
	}
}

func allEvents(t *testing.T, s *webhooks.Service) []webhooks.Event {
	t.Helper()
	evs, _, err := s.ListEvents(ctx, webhooks.EventQuery{Oldest: true, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestOptInEventTypes: "*" covers every type but action.invoked and
// action.failed; those reach only webhooks listing them, and are not even
// recorded when nobody does.
func TestOptInEventTypes(t *testing.T) {
	s, st := newService(t, config.Webhooks{}, nil)
	s.Start()
	type hook struct {
		events []string
		rcv    *webhooktest.Receiver
	}
	hooks := map[string]*hook{
		"all":     {events: []string{"*"}},
		"invoked": {events: []string{events.ActionInvoked}},
		"both":    {events: []string{"*", events.ActionInvoked}},
	}
	for _, h := range hooks {
		h.rcv = webhooktest.New(t)
		_, secret, err := s.Create(ctx, webhooks.Input{URL: h.rcv.URL(), Events: h.events})
		if err != nil {
			t.Fatal(err)
		}
		h.rcv.Expect(secret)
	}
	record(t, s, st, events.ActionFailed, map[string]any{"connector": "gh", "action": "x"})
	record(t, s, st, events.ActionInvoked, map[string]any{"connector": "gh", "action": "x"})
	record(t, s, st, events.ConnectorCreated, map[string]any{"name": "gh"})

	want := map[string][]string{
		"all":     {events.ConnectorCreated},
		"invoked": {events.ActionInvoked},
		"both":    {events.ActionInvoked, events.ConnectorCreated},
	}
	for name, h := range hooks {
		webhooktest.WaitFor(t, name+" deliveries", time.Minute, func() bool { return len(h.rcv.Delivered()) == len(want[name]) })
		var got []string
		for _, r := range h.rcv.Received() {
			got = append(got, r.Event.Type)
		}
		if !slices.Equal(got, want[name]) {
			t.Errorf("%s received %v, want %v", name, got, want[name])
		}
		h.rcv.CheckClean(t)
	}
	var types []string
	for _, e := range allEvents(t, s) {
		types = append(types, e.Type)
	}
	if !slices.Equal(types, []string{events.ActionInvoked, events.ConnectorCreated}) {
		t.Errorf("recorded %v; action.failed, wanted by nobody, must not be", types)
	}
	// An unknown type is a programming error, refused loudly.
	if err := st.Update(ctx, func(tx store.Tx) error { return s.Record(tx, "connector.exploded", nil) }); err == nil {
		t.Error("Record accepted an unknown event type")
	}
}

// TestPrune: events beyond maxEvents or older than retention go, with
// their finished deliveries; events with a pending delivery stay; a
// rotated-out secret is dropped after its grace period.
func TestPrune(t *testing.T) {
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, st := newService(t, config.Webhooks{MaxEvents: 5, Retention: config.Duration(24 * time.Hour)}, clk.now)
	// Not started: deliveries stay pending, nothing is attempted.
	pendingHook, _, err := s.Create(ctx, webhooks.Input{URL: "http://127.0.0.1:9/x", Events: []string{events.ConnectorDeleted}})
	if err != nil {
		t.Fatal(err)
	}
	record(t, s, st, events.ConnectorDeleted, map[string]any{"name": "old"}) // pending for pendingHook
	for i := range 9 {
		clk.add(time.Minute)
		record(t, s, st, events.ConnectorCreated, map[string]any{"name": i})
	}
	evs := allEvents(t, s)
	if len(evs) != 10 {
		t.Fatalf("%d events before pruning", len(evs))
	}
	if err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	after := allEvents(t, s)
	var kept []string
	for _, e := range after {
		kept = append(kept, e.ID)
	}
	want := []string{evs[0].ID, evs[5].ID, evs[6].ID, evs[7].ID, evs[8].ID, evs[9].ID}
	if !slices.Equal(kept, want) {
		t.Errorf("kept %v, want the pending one and the newest 5 %v", kept, want)
	}
	if _, err := s.GetEvent(ctx, evs[1].ID); errs.KindOf(err) != errs.NotFound {
		t.Errorf("pruned event: %v", err)
	}
	ds, _, err := s.ListDeliveries(ctx, pendingHook.ID, webhooks.DeliveryQuery{Limit: 100})
	if err != nil || len(ds) != 1 || ds[0].Status != webhooks.StatusPending {
		t.Errorf("pending delivery after pruning = %+v, %v", ds, err)
	}

	// By age: a day later everything but the pending event goes.
	clk.add(25 * time.Hour)
	if err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if after := allEvents(t, s); len(after) != 1 || after[0].ID != evs[0].ID {
		t.Errorf("after the retention period: %d events", len(after))
	}
	// Once the webhook is gone, its pending delivery no longer holds the event.
	if err := s.Delete(ctx, pendingHook.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if after := allEvents(t, s); len(after) != 0 {
		t.Errorf("%d events left", len(after))
	}

	// Rotation grace ends: the previous secret is dropped.
	w, _, err := s.Create(ctx, webhooks.Input{URL: "http://127.0.0.1:9/y", Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	g := time.Hour
	w, _, err = s.RotateSecret(ctx, w.ID, "", &g, nil)
	if err != nil || w.PreviousSecretExpiresAt == nil {
		t.Fatalf("rotate: %+v, %v", w, err)
	}
	clk.add(2 * time.Hour)
	if err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if w, err = s.Get(ctx, w.ID); err != nil || w.PreviousSecretExpiresAt != nil || w.Version != 2 {
		t.Errorf("after the grace period: %+v, %v", w, err)
	}
}

// TestEventDataIsStoredVerbatim: an event is recorded even when no
// webhook wants it (the log is for GET /v1/events too); its body is
// {id, type, createdAt, data} with data as given.
func TestEventDataIsStoredVerbatim(t *testing.T) {
	s, st := newService(t, config.Webhooks{}, nil)
	data := map[string]any{"id": "key_1", "name": "ci", "scopes": []string{"llm"}}
	record(t, s, st, events.APIKeyCreated, data)
	evs := allEvents(t, s)
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	ev, err := s.GetEvent(ctx, evs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(data)
	if string(ev.Data) != string(want) || ev.Type != events.APIKeyCreated || ev.CreatedAt.Location() != time.UTC || time.Since(ev.CreatedAt) > time.Minute {
		t.Errorf("event = %+v (data %s)", ev, ev.Data)
	}
	b, _ := json.Marshal(ev)
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil || len(keys) != 4 || keys["id"] == nil || keys["createdAt"] == nil {
		t.Errorf("event JSON = %s", b)
	}
}
