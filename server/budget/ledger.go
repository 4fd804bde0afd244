package budget

import (
	"context"
	"sync"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

// Ledger holds the running spend of budget periods and the cost reserved
// by the calls in flight. The tracker's memory (the default) and Redis
// (RedisLedger) implement it.
type Ledger interface {
	// Admit reserves worstUSD in per unless the spend plus the
	// reservations has reached budgetUSD. seed gives the period's spend
	// from the usage records when the ledger has none yet.
	Admit(ctx context.Context, per Period, budgetUSD, worstUSD float64, seed Seed) (Hold, error)
	// Settle releases reservedUSD and adds costUSD to per's spend. It
	// returns the spend after it, and ok false when it is unknown (the
	// ledger lost the period); it never fails: the call was made.
	Settle(ctx context.Context, per Period, reservedUSD, costUSD float64) (spent float64, ok bool)
	// Spent is per's spend, without the reservations.
	Spent(ctx context.Context, per Period, seed Seed) (float64, error)
}

// Period is one credential's budget period.
type Period struct {
	Credential string
	// Name is the budget's period (day, week, month, total).
	Name string
	// Start and End bound the period; End is zero for total.
	Start, End time.Time
}

// Seed reads a period's spend from the usage records.
type Seed func(ctx context.Context) (float64, error)

// Hold is the outcome of Ledger.Admit.
type Hold struct {
	// Admitted is false when the budget is spent.
	Admitted bool
	// Spent is the period's spend before this call.
	Spent float64
	// Reserved is what the ledger holds for this call (0 when it admitted
	// without holding, as a Redis ledger failing open does).
	Reserved float64
}

// memoryLedger keeps each credential's current period in this process.
type memoryLedger struct {
	entries sync.Map // credential id -> *memoryEntry
}

type memoryEntry struct {
	mu       sync.Mutex
	loaded   bool
	per      Period
	spent    float64
	reserved float64
}

func (l *memoryLedger) entry(id string) *memoryEntry {
	if e, ok := l.entries.Load(id); ok {
		return e.(*memoryEntry)
	}
	e, _ := l.entries.LoadOrStore(id, &memoryEntry{})
	return e.(*memoryEntry)
}

// current brings e to per, seeding its spend when the period changed (a
// new day, or a budget whose period was changed). Callers hold e.mu.
func (e *memoryEntry) current(ctx context.Context, per Period, seed Seed) error {
	if e.loaded && e.per.Name == per.Name && e.per.Start.Equal(per.Start) {
		return nil
	}
	spent, err := seed(ctx)
	if err != nil {
		return err
	}
	e.loaded, e.per, e.spent = true, per, spent
	return nil
}

func (l *memoryLedger) Admit(ctx context.Context, per Period, budgetUSD, worstUSD float64, seed Seed) (Hold, error) {
	e := l.entry(per.Credential)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.current(ctx, per, seed); err != nil {
		return Hold{}, err
	}
	if e.spent+e.reserved >= budgetUSD {
		return Hold{Spent: e.spent}, nil
	}
	e.reserved += worstUSD
	return Hold{Admitted: true, Spent: e.spent, Reserved: worstUSD}, nil
}

func (l *memoryLedger) Settle(_ context.Context, per Period, reservedUSD, costUSD float64) (float64, bool) {
	e := l.entry(per.Credential)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reserved = max(0, e.reserved-reservedUSD)
	if e.reserved < 1e-12 {
		e.reserved = 0
	}
	e.spent = usage.AddUSD(e.spent, costUSD)
	return e.spent, true
}

func (l *memoryLedger) Spent(ctx context.Context, per Period, seed Seed) (float64, error) {
	e := l.entry(per.Credential)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.current(ctx, per, seed); err != nil {
		return 0, err
	}
	return e.spent, nil
}
