// Package budget enforces the spend budgets of credentials (API keys and
// OAuth clients, auth.Policy.Budget).
//
// A Tracker keeps, per credential, the spend of the budget's current
// period and the cost reserved by the model calls in flight. The spend is
// read once per period from the usage records (which include totals not
// yet flushed) and then kept in memory: admitting and settling a call
// never touches the disk. A call is refused with errs.BudgetExceeded once
// spent + reserved reaches the budget; otherwise it reserves its
// worst-case cost and settles with its actual cost when it ends, so
// concurrent calls overshoot the budget by at most one call's cost.
//
// Crossing an alert fraction emits usage.budget_alert and reaching the
// budget emits usage.budget_exhausted, each once per period: deduplicated
// in memory first, then by the event queue's Once key across restarts and
// replicas.
//
// Where the running spend and the reservations live is the Ledger: in
// this process's memory by default (replicas sharing a store then each
// count the calls they serve on top of what the usage records held when
// the period's spend was read), or in Redis (RedisLedger), where every
// replica adds to one total, so that a budget holds across replicas.
package budget

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

// Usage answers how much a credential spent (usage.Recorder).
type Usage interface {
	Query(ctx context.Context, q usage.Query) ([]usage.Row, error)
}

// Tracker counts spend against budgets. The zero value is not usable: set
// Usage. Events, Now, Log and Ledger are optional.
type Tracker struct {
	// Usage is read once per credential and period.
	Usage Usage
	// Events receives usage.budget_alert and usage.budget_exhausted; nil
	// drops them.
	Events events.Emitter
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Log reports failed reads of the usage records; slog.Default when nil.
	Log *slog.Logger
	// Ledger holds the running spend and the reservations; in this
	// process's memory when nil, in Redis (RedisLedger) to share them
	// across replicas.
	Ledger Ledger

	memory memoryLedger
	states sync.Map // credential id -> *state
}

// state is what a tracker remembers of one credential's period beyond the
// ledger: the events already emitted in it.
type state struct {
	mu sync.Mutex
	// period and start name the period the fields below belong to.
	period string
	start  time.Time
	// alerted lists the fractions already alerted in this period.
	alerted   []float64
	exhausted bool
}

// Spend is a credential's spend in its budget's current period.
type Spend struct {
	Period      string
	PeriodStart time.Time
	// ResetAt is zero for total.
	ResetAt   time.Time
	BudgetUSD float64
	// SpentUSD excludes the calls in flight.
	SpentUSD float64
}

// RemainingUSD is BudgetUSD - SpentUSD, never below 0.
func (s Spend) RemainingUSD() float64 { return max(0, usage.RoundUSD(s.BudgetUSD-s.SpentUSD)) }

// Credential is what the tracker needs of a credential.
type Credential struct {
	ID string
	// Kind is auth.KindAPIKey or auth.KindOAuthToken.
	Kind      string
	Name      string
	CreatedAt time.Time
	Budget    *auth.Budget
}

// CredentialOf is p's Credential.
func CredentialOf(p *auth.Principal) Credential {
	return Credential{ID: p.ID, Kind: p.Kind, Name: p.Name, CreatedAt: p.CreatedAt, Budget: p.Budget}
}

func (t *Tracker) now() time.Time {
	if t.Now != nil {
		return t.Now().UTC()
	}
	return time.Now().UTC()
}

func (t *Tracker) log() *slog.Logger {
	if t.Log != nil {
		return t.Log
	}
	return slog.Default()
}

func (t *Tracker) ledger() Ledger {
	if t.Ledger != nil {
		return t.Ledger
	}
	return &t.memory
}

func (t *Tracker) state(id string) *state {
	if st, ok := t.states.Load(id); ok {
		return st.(*state)
	}
	st, _ := t.states.LoadOrStore(id, &state{})
	return st.(*state)
}

// period is c's budget period holding now.
func period(c Credential, now time.Time) Period {
	start, end := c.Budget.Window(now, c.CreatedAt)
	return Period{Credential: c.ID, Name: c.Budget.Period, Start: start, End: end}
}

// seed reads c's spend in per from the usage records (which include
// totals not yet flushed).
func (t *Tracker) seed(c Credential, per Period) Seed {
	return func(ctx context.Context) (float64, error) {
		rows, err := t.Usage.Query(ctx, usage.Query{PrincipalID: c.ID, From: per.Start})
		if err != nil {
			t.log().Error("budget: reading spend failed", "credential", c.ID, "error", err.Error())
			return 0, errs.Wrap(errs.Unavailable, err, "the spend of credential "+c.ID+" could not be read; retry the request")
		}
		spent := 0.0
		for _, r := range rows {
			spent = usage.AddUSD(spent, r.CostUSD)
		}
		return spent, nil
	}
}

// Reservation is the worst-case cost held for one admitted call.
type Reservation struct {
	t      *Tracker
	c      Credential
	per    Period
	amount float64
	once   sync.Once
}

// Admit admits a model call of credential c whose worst-case cost is
// worstUSD, before it goes upstream. It returns nil, nil when c has no
// budget. It fails with errs.BudgetExceeded (429, Retry-After until the
// period ends) when the spend plus the cost reserved by calls in flight
// has reached the budget, and with errs.Unavailable when the period's
// spend could not be read.
func (t *Tracker) Admit(ctx context.Context, c Credential, worstUSD float64) (*Reservation, error) {
	if c.Budget == nil {
		return nil, nil
	}
	now := t.now()
	per := period(c, now)
	worstUSD = max(0, worstUSD)
	h, err := t.ledger().Admit(ctx, per, c.Budget.USD, worstUSD, t.seed(c, per))
	if err != nil {
		return nil, err
	}
	if !h.Admitted {
		t.emit(t.check(per, c, h.Spent))
		return nil, exceeded(c, Spend{Period: per.Name, PeriodStart: per.Start, ResetAt: per.End, BudgetUSD: c.Budget.USD, SpentUSD: h.Spent}, now)
	}
	return &Reservation{t: t, c: c, per: per, amount: h.Reserved}, nil
}

// Settle releases the reservation and adds the call's actual cost to the
// spend (once; later calls do nothing). A nil Reservation does nothing.
func (r *Reservation) Settle(costUSD float64) {
	if r == nil {
		return
	}
	r.once.Do(func() {
		spent, ok := r.t.ledger().Settle(context.Background(), r.per, r.amount, max(0, costUSD))
		// A call that ended after its period did is counted by the next
		// period's read; its events belong to no period still current.
		if ok && (r.per.End.IsZero() || r.t.now().Before(r.per.End)) {
			r.t.emit(r.t.check(r.per, r.c, spent))
		}
	})
}

// Spend reports c's spend in its budget's current period; ok is false
// when c has no budget. It reads the usage records only the first time a
// period is asked for.
func (t *Tracker) Spend(ctx context.Context, c Credential) (s Spend, ok bool, err error) {
	if c.Budget == nil {
		return Spend{}, false, nil
	}
	per := period(c, t.now())
	spent, err := t.ledger().Spent(ctx, per, t.seed(c, per))
	if err != nil {
		return Spend{}, false, err
	}
	return Spend{Period: per.Name, PeriodStart: per.Start, ResetAt: per.End, BudgetUSD: c.Budget.USD, SpentUSD: spent}, true, nil
}

// exceeded is the 429 for a spent budget.
func exceeded(c Credential, s Spend, now time.Time) error {
	d := map[string]any{"budgetUsd": s.BudgetUSD, "spentUsd": s.SpentUSD, "period": s.Period}
	var e *errs.Error
	if s.ResetAt.IsZero() {
		e = errs.E(errs.BudgetExceeded, "credential %s has spent $%s of its total budget of $%s, which never resets; raise budget.usd (PUT %s) to allow more model calls",
			c.ID, usd(s.SpentUSD), usd(s.BudgetUSD), updatePath(c))
	} else {
		e = errs.E(errs.BudgetExceeded, "credential %s has spent $%s of its %s budget of $%s; it resets at %s, or raise budget.usd (PUT %s)",
			c.ID, usd(s.SpentUSD), periodly(s.Period), usd(s.BudgetUSD), s.ResetAt.Format(time.RFC3339), updatePath(c))
		d["resetAt"] = s.ResetAt.Format(time.RFC3339)
		e.RetryAfter = max(time.Second, s.ResetAt.Sub(now))
	}
	return e.WithDetails(d)
}

func periodly(p string) string {
	switch p {
	case auth.PeriodDay:
		return "daily"
	case auth.PeriodWeek:
		return "weekly"
	case auth.PeriodMonth:
		return "monthly"
	}
	return p
}

// usd formats an amount without trailing zeros ("0.25", "12", "0.0000705").
func usd(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func updatePath(c Credential) string {
	if c.Kind == auth.KindOAuthToken {
		return "/v1/oauth-clients/" + c.ID
	}
	return "/v1/api-keys/" + c.ID
}

// check returns the events a spend of spent has newly earned in per,
// deduplicated in this process (the event queue's Once keys deduplicate
// across replicas).
func (t *Tracker) check(per Period, c Credential, spent float64) []events.Pending {
	if t.Events == nil {
		return nil
	}
	st := t.state(c.ID)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.period != per.Name || !st.start.Equal(per.Start) {
		st.period, st.start, st.alerted, st.exhausted = per.Name, per.Start, nil, false
	}
	b := c.Budget
	var out []events.Pending
	for _, a := range b.AlertAt {
		if spent >= a*b.USD && !slices.Contains(st.alerted, a) {
			st.alerted = append(st.alerted, a)
			out = append(out, t.event(events.BudgetAlert, per, c, spent, a))
		}
	}
	if spent >= b.USD && !st.exhausted {
		st.exhausted = true
		out = append(out, t.event(events.BudgetExhausted, per, c, spent, 0))
	}
	return out
}

// event builds one budget event with its Once key.
func (t *Tracker) event(typ string, per Period, c Credential, spent, threshold float64) events.Pending {
	data := map[string]any{
		"key":         c.ID,
		"keyKind":     c.Kind,
		"keyName":     c.Name,
		"period":      per.Name,
		"periodStart": per.Start.Format(time.RFC3339),
		"budgetUsd":   c.Budget.USD,
		"spentUsd":    spent,
	}
	once := typ + "/" + c.ID + "/" + per.Name + "/" + per.Start.Format(time.RFC3339)
	if typ == events.BudgetAlert {
		data["threshold"] = threshold
		once += "/" + strconv.FormatFloat(threshold, 'f', -1, 64)
	}
	p := events.Pending{Type: typ, Data: data, Once: once}
	if !per.End.IsZero() {
		data["resetAt"] = per.End.Format(time.RFC3339)
		// Kept a day past the period, after which it cannot recur.
		p.OnceUntil = per.End.Add(24 * time.Hour)
	}
	return p
}

func (t *Tracker) emit(ps []events.Pending) {
	for _, p := range ps {
		t.Events.Emit(p)
	}
}
