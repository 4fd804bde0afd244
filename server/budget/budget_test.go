package budget_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/budget"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redisconn"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redistest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// recorder is a real usage recorder on bbolt holding, for credential
// "key_1", $8 on 2030-02-20, $4 on 2030-03-02, $2 on Tuesday 2030-03-12
// and $1 on Friday 2030-03-15 at 09:00 UTC.
func recorder(t *testing.T) *usage.Recorder {
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var now time.Time
	rec := usage.New(st, usage.Options{Now: func() time.Time { return now }})
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	for _, r := range []struct {
		at  string
		usd float64
	}{{"2030-02-20T09:00:00Z", 8}, {"2030-03-02T09:00:00Z", 4}, {"2030-03-12T09:00:00Z", 2}, {"2030-03-15T09:00:00Z", 1}} {
		now = at(r.at)
		rec.Record("key_1", "openai/gpt-4o-mini", 10, 10, r.usd)
		rec.Record("key_2", "openai/gpt-4o-mini", 10, 10, 100) // another credential
	}
	if err := rec.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestSpend_PeriodWindows: the spend is the usage of the budget's current
// period: the UTC day, the ISO week from Monday, the calendar month, or
// everything since the credential was created; it resets at the period's
// end (never for total).
func TestSpend_PeriodWindows(t *testing.T) {
	rec := recorder(t)
	tests := []struct {
		period       string
		spent        float64
		start, reset string
	}{
		{auth.PeriodDay, 1, "2030-03-15T00:00:00Z", "2030-03-16T00:00:00Z"},
		{auth.PeriodWeek, 3, "2030-03-11T00:00:00Z", "2030-03-18T00:00:00Z"},
		{auth.PeriodMonth, 7, "2030-03-01T00:00:00Z", "2030-04-01T00:00:00Z"},
		{auth.PeriodTotal, 15, "2030-02-01T00:00:00Z", ""},
	}
	for _, tc := range tests {
		t.Run(tc.period, func(t *testing.T) {
			tr := &budget.Tracker{Usage: rec, Now: func() time.Time { return at("2030-03-15T10:00:00Z") }}
			c := budget.Credential{ID: "key_1", Kind: auth.KindAPIKey, CreatedAt: at("2030-02-01T00:00:00Z"), Budget: &auth.Budget{USD: 10, Period: tc.period}}
			s, ok, err := tr.Spend(context.Background(), c)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			reset := ""
			if !s.ResetAt.IsZero() {
				reset = s.ResetAt.Format(time.RFC3339)
			}
			if s.SpentUSD != tc.spent || s.PeriodStart.Format(time.RFC3339) != tc.start || reset != tc.reset || s.Period != tc.period {
				t.Errorf("spend = %+v, want %v from %s resetting at %q", s, tc.spent, tc.start, reset)
			}
			if want := max(0, 10-tc.spent); s.RemainingUSD() != want {
				t.Errorf("remaining = %v, want %v", s.RemainingUSD(), want)
			}
		})
	}
}

// TestAdmit_CountsInMemoryAndFollowsBudgetChanges: settled calls add to
// the spend without another read of the usage records; a call is refused
// once spent plus reserved reaches the budget and admitted again when the
// budget is raised; changing the period reads the new period's spend.
func TestAdmit_CountsAndFollowsBudgetChanges(t *testing.T) {
	for _, lg := range ledgers {
		t.Run(lg.name, func(t *testing.T) { testAdmit(t, lg.new(t)) })
	}
}

// ledgers are the ledgers the tracker's behaviour is checked with: its
// memory, and Redis shared by two trackers (two replicas), the calls
// alternating between them.
var ledgers = []struct {
	name string
	new  func(t *testing.T) [2]budget.Ledger
}{
	{"memory", func(t *testing.T) [2]budget.Ledger { return [2]budget.Ledger{} }},
	{"redis, two replicas", func(t *testing.T) [2]budget.Ledger {
		srv := redistest.New(t)
		var out [2]budget.Ledger
		for i := range out {
			out[i] = &budget.RedisLedger{Client: redisClient(t, srv.URL()), Fallback: &redisconn.Fallback{Closed: true, Timeout: 5 * time.Second}}
		}
		return out
	}},
}

func redisClient(t *testing.T, url string) *redis.Client {
	c, err := redisconn.Open(config.Redis{URL: url, Timeout: config.Duration(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testAdmit(t *testing.T, ls [2]budget.Ledger) {
	rec := recorder(t)
	now := func() time.Time { return at("2030-03-15T10:00:00Z") }
	a := &budget.Tracker{Usage: rec, Now: now, Ledger: ls[0]}
	b := a
	if ls[1] != nil {
		b = &budget.Tracker{Usage: rec, Now: now, Ledger: ls[1]}
	}
	ctx := context.Background()
	c := budget.Credential{ID: "key_1", Kind: auth.KindAPIKey, Budget: &auth.Budget{USD: 2, Period: auth.PeriodDay}}

	r1, err := a.Admit(ctx, c, 0.75) // spent 1, reserved 0.75
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Admit(ctx, c, 0.5); err != nil { // 1.75 < 2: admitted, reserved 1.25
		t.Fatal(err)
	}
	if _, err := a.Admit(ctx, c, 0.1); !errors.Is(err, errs.BudgetExceeded) {
		t.Fatalf("third call = %v, want budget_exceeded (1 spent + 1.25 reserved >= 2)", err)
	}
	r1.Settle(0.25)
	r1.Settle(0.25) // a second settle does nothing
	if s, _, _ := b.Spend(ctx, c); s.SpentUSD != 1.25 {
		t.Errorf("spent = %v, want 1.25", s.SpentUSD)
	}
	var e *errs.Error
	c.Budget = &auth.Budget{USD: 1.25, Period: auth.PeriodDay}
	if _, err := b.Admit(ctx, c, 0); !errors.As(err, &e) || e.RetryAfter != 14*time.Hour || e.Details["resetAt"] != "2030-03-16T00:00:00Z" {
		t.Fatalf("refusal = %#v, want Retry-After 14h until midnight", err)
	}
	c.Budget = &auth.Budget{USD: 3, Period: auth.PeriodDay}
	if _, err := b.Admit(ctx, c, 0); err != nil {
		t.Fatalf("after raising the budget: %v", err)
	}
	c.Budget = &auth.Budget{USD: 10, Period: auth.PeriodMonth}
	if s, _, _ := b.Spend(ctx, c); s.SpentUSD != 7 {
		t.Errorf("month spend = %v, want 7 read from the records", s.SpentUSD)
	}
}

// TestRedisLedger_Outage: while Redis is down a budget fails closed
// (unavailable) or open (admitted without a reservation), spend reports
// fall back to the usage records, and once Redis is back (empty) the spend
// is seeded again from the records and enforced.
func TestRedisLedger_Outage(t *testing.T) {
	for _, closed := range []bool{false, true} {
		t.Run(map[bool]string{false: "fail open", true: "fail closed"}[closed], func(t *testing.T) {
			srv := redistest.New(t)
			tr := &budget.Tracker{Usage: recorder(t), Now: func() time.Time { return at("2030-03-15T10:00:00Z") },
				Ledger: &budget.RedisLedger{Client: redisClient(t, srv.URL()), Fallback: &redisconn.Fallback{Closed: closed, Timeout: time.Second}}}
			ctx := context.Background()
			c := budget.Credential{ID: "key_1", Kind: auth.KindAPIKey, Budget: &auth.Budget{USD: 2, Period: auth.PeriodDay}}
			if _, err := tr.Admit(ctx, c, 0.5); err != nil {
				t.Fatal(err)
			}
			if err := srv.Stop(); err != nil {
				t.Fatal(err)
			}
			_, err := tr.Admit(ctx, c, 0.5)
			if closed != errors.Is(err, errs.Unavailable) || (!closed && err != nil) {
				t.Fatalf("admit while Redis is down = %v", err)
			}
			if s, _, err := tr.Spend(ctx, c); err != nil || s.SpentUSD != 1 {
				t.Errorf("spend while Redis is down = %v, %v; want 1 from the usage records", s.SpentUSD, err)
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			r, err := tr.Admit(ctx, c, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			r.Settle(1)
			if _, err := tr.Admit(ctx, c, 0.1); !errors.Is(err, errs.BudgetExceeded) {
				t.Fatalf("after Redis is back: 1 from the records + 1 settled = %v, want budget_exceeded", err)
			}
		})
	}
}
