package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store/storetest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/tools"
)

// toolsetRecorder keeps the events that committed, as JSON; fail makes
// Record fail, to prove the write shares its transaction.
type toolsetRecorder struct {
	events []toolsetEvent
	fail   bool
}

type toolsetEvent struct {
	Type string
	Data tools.Toolset
}

var _ events.Recorder = (*toolsetRecorder)(nil)

func (r *toolsetRecorder) Record(tx store.Tx, typ string, data any) error {
	if !tx.Writable() {
		return errors.New("Record outside a write transaction")
	}
	if r.fail {
		return errors.New("recorder failed")
	}
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var t tools.Toolset
	if err := json.Unmarshal(b, &t); err != nil {
		return err
	}
	tx.OnCommit(func() { r.events = append(r.events, toolsetEvent{typ, t}) })
	return nil
}

// newToolsets is a Toolsets on a fresh store (bbolt, or PostgreSQL with
// SWITCHBOARD_TEST_STORE=postgres) whose transactions run as after
// serialization failures (storetest.Retried), with a ticking clock.
func newToolsets(t *testing.T) (*tools.Toolsets, *toolsetRecorder) {
	t.Helper()
	st := storetest.Shared(t)
	rec := &toolsetRecorder{}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	return &tools.Toolsets{Store: storetest.Retried(st), Events: rec, Now: func() time.Time { now = now.Add(time.Second); return now }}, rec
}

func TestEntryProblem(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		entry string
		ok    bool
	}{
		{"weather.forecast", true},
		{"crm.*", true},
		{"crm", true},
		{"a_1.b_2", true},
		{long + "." + long, true},
		{"", false},
		{"Weather.forecast", false},
		{"weather.Forecast", false},
		{"crm.", false},
		{".forecast", false},
		{"crm.*.x", false},
		{"crm.create_*", false},
		{"*", false},
		{"*.forecast", false},
		{"a.b.c", false},
		{"crm/contacts", false},
		{"crm-x", false},
		{"1crm", false},
		{" crm", false},
		{"crm\n", false},
		{long + "a", false},
		{"crm." + long + "a", false},
	} {
		t.Run(strings.ReplaceAll(tc.entry, "\n", `\n`), func(t *testing.T) {
			p := tools.EntryProblem(tc.entry)
			if (p == "") != tc.ok {
				t.Fatalf("EntryProblem(%q) = %q, want ok=%v", tc.entry, p, tc.ok)
			}
			if !tc.ok && !strings.Contains(p, "connector.action, connector.* or connector") {
				t.Errorf("problem %q does not say the syntax", p)
			}
		})
	}
}

func TestSelection_Has(t *testing.T) {
	sel := tools.Select([]string{"weather.forecast", "crm.*", "zendesk"})
	for _, tc := range []struct {
		name              string
		sel               *tools.Selection
		connector, action string
		want              bool
	}{
		{"named action", sel, "weather", "forecast", true},
		{"other action of a named action's connector", sel, "weather", "current", false},
		{"connector.*", sel, "crm", "create_contact", true},
		{"bare connector", sel, "zendesk", "list_tickets", true},
		{"connector with a selected name as prefix", sel, "crmx", "create_contact", false},
		{"unnamed connector", sel, "github", "list_issues", false},
		{"nil selects everything", nil, "github", "list_issues", true},
		{"empty selects nothing", tools.Select(nil), "crm", "x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.sel.Has(tc.connector, tc.action); got != tc.want {
				t.Errorf("Has(%s, %s) = %v, want %v", tc.connector, tc.action, got, tc.want)
			}
		})
	}
}

func TestToolsets_CreateValidation(t *testing.T) {
	many := make([]string, tools.MaxToolsetEntries+1)
	for i := range many {
		many[i] = "c.a" + strings.Repeat("x", i%60) + string(rune('a'+i/60))
	}
	for _, tc := range []struct {
		name   string
		in     tools.Toolset
		fields []string
	}{
		{"no name", tools.Toolset{Tools: []string{"crm"}}, []string{"name"}},
		{"bad name", tools.Toolset{Name: "my-tools", Tools: []string{"crm"}}, []string{"name"}},
		{"no tools", tools.Toolset{Name: "x"}, []string{"tools"}},
		{"too many tools", tools.Toolset{Name: "x", Tools: many}, []string{"tools"}},
		{"bad entries", tools.Toolset{Name: "x", Tools: []string{"crm", "crm.", "a.b.c"}}, []string{"tools[1]", "tools[2]"}},
		{"duplicate entry", tools.Toolset{Name: "x", Tools: []string{"crm.*", "crm", "crm.*"}}, []string{"tools[2]"}},
		{"description too long", tools.Toolset{Name: "x", Tools: []string{"crm"}, Description: strings.Repeat("é", tools.MaxToolsetDescription+1)}, []string{"description"}},
		{"control character", tools.Toolset{Name: "x", Tools: []string{"crm"}, Description: "a\x00b"}, []string{"description"}},
		{"everything", tools.Toolset{Name: "X", Tools: []string{"crm", "crm"}, Description: "\x1b"}, []string{"name", "description", "tools[1]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rec := newToolsets(t)
			_, err := s.Create(context.Background(), tc.in)
			if errs.KindOf(err) != errs.Validation {
				t.Fatalf("Create = %v, want a validation error", err)
			}
			var fields []string
			for _, p := range errs.ProblemsOf(err) {
				fields = append(fields, p.Field)
			}
			if !slices.Equal(fields, tc.fields) {
				t.Errorf("problems name %v, want %v (%v)", fields, tc.fields, err)
			}
			if len(rec.events) != 0 {
				t.Errorf("events %v recorded for a refused toolset", rec.events)
			}
		})
	}
	t.Run("accepted", func(t *testing.T) {
		s, _ := newToolsets(t)
		ok := tools.Toolset{Name: "x", Tools: []string{"crm"}, Description: "Line one\n\tline two é"}
		if _, err := s.Create(context.Background(), ok); err != nil {
			t.Fatal(err)
		}
	})
}

// TestToolsets_Lifecycle: versions, timestamps and events across create,
// replace and delete, on a store that reruns every transaction.
func TestToolsets_Lifecycle(t *testing.T) {
	ctx := context.Background()
	s, rec := newToolsets(t)
	c, err := s.Create(ctx, tools.Toolset{Name: "support", Description: "d", Tools: []string{"crm.*"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != 1 || !c.CreatedAt.Equal(c.UpdatedAt) || c.CreatedAt.IsZero() {
		t.Errorf("created = %+v", c)
	}
	if _, err := s.Create(ctx, tools.Toolset{Name: "support", Tools: []string{"crm"}}); errs.KindOf(err) != errs.Conflict {
		t.Errorf("second create = %v, want conflict", err)
	}

	r, err := s.Replace(ctx, "support", tools.Toolset{Tools: []string{"weather.forecast"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "support" || r.Version != 2 || r.Description != "" || !r.CreatedAt.Equal(c.CreatedAt) || !r.UpdatedAt.After(c.UpdatedAt) {
		t.Errorf("replaced = %+v", r)
	}
	for _, tc := range []struct {
		name    string
		in      tools.Toolset
		ifMatch int64
		want    errs.Kind
	}{
		{"stale version", tools.Toolset{Tools: []string{"crm"}}, 1, errs.PreconditionFailed},
		{"stale and invalid: the precondition first", tools.Toolset{Tools: []string{"bad entry"}}, 1, errs.PreconditionFailed},
		{"renamed", tools.Toolset{Name: "other", Tools: []string{"crm"}}, 0, errs.Validation},
		{"invalid", tools.Toolset{Tools: nil}, 2, errs.Validation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Replace(ctx, "support", tc.in, tc.ifMatch); errs.KindOf(err) != tc.want {
				t.Errorf("Replace = %v, want %s", err, tc.want)
			}
		})
	}
	if _, err := s.Replace(ctx, "nope", tools.Toolset{Tools: []string{"crm"}}, 0); errs.KindOf(err) != errs.NotFound {
		t.Errorf("replace of a missing toolset = %v, want not found", err)
	}
	got, err := s.Get(ctx, "support")
	if err != nil || got.Version != 2 || !slices.Equal(got.Tools, []string{"weather.forecast"}) {
		t.Errorf("after refused replaces: %+v, %v", got, err)
	}

	if err := s.Delete(ctx, "support", 1); errs.KindOf(err) != errs.PreconditionFailed {
		t.Errorf("stale delete = %v", err)
	}
	if err := s.Delete(ctx, "support", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "support"); errs.KindOf(err) != errs.NotFound {
		t.Errorf("get after delete = %v", err)
	}
	if err := s.Delete(ctx, "support", 0); errs.KindOf(err) != errs.NotFound {
		t.Errorf("second delete = %v", err)
	}

	var types []string
	var versions []int64
	for _, e := range rec.events {
		types = append(types, e.Type)
		versions = append(versions, e.Data.Version)
	}
	if want := []string{events.ToolsetCreated, events.ToolsetUpdated, events.ToolsetDeleted}; !slices.Equal(types, want) {
		t.Errorf("events = %v, want %v", types, want)
	}
	if want := []int64{1, 2, 2}; !slices.Equal(versions, want) {
		t.Errorf("event versions = %v, want %v (a deletion carries the toolset as it was)", versions, want)
	}
}

// TestToolsets_EventFailureWritesNothing: the event shares the write's
// transaction, so a failing recorder leaves nothing behind.
func TestToolsets_EventFailureWritesNothing(t *testing.T) {
	ctx := context.Background()
	s, rec := newToolsets(t)
	if _, err := s.Create(ctx, tools.Toolset{Name: "kept", Tools: []string{"crm"}}); err != nil {
		t.Fatal(err)
	}
	rec.fail = true
	if _, err := s.Create(ctx, tools.Toolset{Name: "lost", Tools: []string{"crm"}}); err == nil {
		t.Error("create succeeded without its event")
	}
	if _, err := s.Replace(ctx, "kept", tools.Toolset{Tools: []string{"weather"}}, 0); err == nil {
		t.Error("replace succeeded without its event")
	}
	if err := s.Delete(ctx, "kept", 0); err == nil {
		t.Error("delete succeeded without its event")
	}
	list, _, err := s.List(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "kept" || list[0].Version != 1 {
		t.Errorf("stored = %+v, want only kept at version 1", list)
	}
}

// TestToolsets_SelectionFollowsChanges: the cached Selection of a toolset
// changes when the toolset is replaced and goes when it is deleted.
func TestToolsets_SelectionFollowsChanges(t *testing.T) {
	ctx := context.Background()
	s, _ := newToolsets(t)
	if _, err := s.Selection(ctx, "support"); errs.KindOf(err) != errs.NotFound {
		t.Fatalf("selection of a missing toolset = %v", err)
	}
	if _, err := s.Create(ctx, tools.Toolset{Name: "support", Tools: []string{"crm.*"}}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name  string
		write func() error
		crm   bool
		wx    bool
	}{
		{"created", func() error { return nil }, true, false},
		{"replaced", func() error {
			_, err := s.Replace(ctx, "support", tools.Toolset{Tools: []string{"weather.forecast"}}, 0)
			return err
		}, false, true},
	} {
		t.Run(step.name, func(t *testing.T) {
			if err := step.write(); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second read comes from the cache
				sel, err := s.Selection(ctx, "support")
				if err != nil {
					t.Fatal(err)
				}
				if sel.Has("crm", "create_contact") != step.crm || sel.Has("weather", "forecast") != step.wx {
					t.Errorf("selection: crm %v weather %v, want %v %v", sel.Has("crm", "create_contact"), sel.Has("weather", "forecast"), step.crm, step.wx)
				}
			}
		})
	}
	if err := s.Delete(ctx, "support", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Selection(ctx, "support"); errs.KindOf(err) != errs.NotFound {
		t.Errorf("selection after delete = %v, want not found", err)
	}
}
