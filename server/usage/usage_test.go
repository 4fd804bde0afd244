package usage_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func openStore(t testing.TB, path string) *store.Bolt {
	t.Helper()
	st, err := store.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
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
		return errors.New("disk full")
	}
	return c.Store.Update(ctx, fn)
}

func TestRecordFlushQuery(t *testing.T) {
	ctx := context.Background()
	st := &countingStore{Store: openStore(t, filepath.Join(t.TempDir(), "db"))}
	clk := &clock{t: time.Date(2025, 3, 1, 10, 15, 0, 0, time.UTC)}
	r := usage.New(st, usage.Options{FlushInterval: time.Hour, Now: clk.now})
	defer r.Close(ctx)

	r.Record("key_a", "openai/gpt-4o-mini", 100, 20, 0.001)
	r.Record("key_a", "openai/gpt-4o-mini", 50, 10, 0.0005)
	r.Record("key_b", "anthropic/claude", 10, 5, 0.002)
	clk.set(clk.now().Add(time.Hour)) // 11:15
	r.Record("key_a", "anthropic/claude", 1, 1, 0.0001)
	clk.set(clk.now().Add(24 * time.Hour)) // next day
	r.Record("key_a", "openai/gpt-4o-mini", 7, 3, 0)

	if n := st.updates.Load(); n != 0 {
		t.Fatalf("Record wrote to the store %d times; it must only aggregate", n)
	}
	// Query sees what is still in memory.
	rows, err := r.Query(ctx, usage.Query{GroupBy: []string{usage.GroupKey}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].PrincipalID != "key_a" || rows[0].Requests != 4 || rows[0].PromptTokens != 158 || rows[0].TotalTokens != 192 {
		t.Fatalf("rows %+v", rows)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := st.updates.Load(); n != 1 {
		t.Errorf("one flush = %d transactions, want 1", n)
	}
	if err := r.Flush(ctx); err != nil || st.updates.Load() != 1 {
		t.Errorf("an empty flush must not write")
	}

	day1 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		q    usage.Query
		want []usage.Row
	}{
		{"everything", usage.Query{}, []usage.Row{{Requests: 5, PromptTokens: 168, CompletionTokens: 39, TotalTokens: 207, CostUSD: 0.0036}}},
		{"by model and day", usage.Query{GroupBy: []string{usage.GroupModel, usage.GroupDay}}, []usage.Row{
			{Model: "anthropic/claude", Period: day1, Requests: 2, PromptTokens: 11, CompletionTokens: 6, TotalTokens: 17, CostUSD: 0.0021},
			{Model: "openai/gpt-4o-mini", Period: day1, Requests: 2, PromptTokens: 150, CompletionTokens: 30, TotalTokens: 180, CostUSD: 0.0015},
			{Model: "openai/gpt-4o-mini", Period: day1.Add(24 * time.Hour), Requests: 1, PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10},
		}},
		{"one key by hour in a range", usage.Query{PrincipalID: "key_a", From: day1.Add(10 * time.Hour), To: day1.Add(12 * time.Hour), GroupBy: []string{usage.GroupHour}}, []usage.Row{
			{Period: day1.Add(10 * time.Hour), Requests: 2, PromptTokens: 150, CompletionTokens: 30, TotalTokens: 180, CostUSD: 0.0015},
			{Period: day1.Add(11 * time.Hour), Requests: 1, PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2, CostUSD: 0.0001},
		}},
		{"one model", usage.Query{Model: "anthropic/claude", GroupBy: []string{usage.GroupKey}}, []usage.Row{
			{PrincipalID: "key_a", Requests: 1, PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2, CostUSD: 0.0001},
			{PrincipalID: "key_b", Requests: 1, PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, CostUSD: 0.002},
		}},
		{"empty range", usage.Query{From: day1.Add(-48 * time.Hour), To: day1.Add(-24 * time.Hour)}, []usage.Row{{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := r.Query(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != len(tc.want) {
				t.Fatalf("rows %+v\nwant %+v", rows, tc.want)
			}
			for i := range rows {
				got, want := rows[i], tc.want[i]
				if d := got.CostUSD - want.CostUSD; d > 1e-12 || d < -1e-12 {
					t.Errorf("row %d cost %v want %v", i, got.CostUSD, want.CostUSD)
				}
				got.CostUSD, want.CostUSD = 0, 0
				if got != want {
					t.Errorf("row %d = %+v\nwant %+v", i, got, want)
				}
			}
		})
	}
	if _, err := r.Query(ctx, usage.Query{GroupBy: []string{"week"}}); err == nil {
		t.Error("unknown groupBy accepted")
	}
}

func TestFailedFlushKeepsTotals(t *testing.T) {
	ctx := context.Background()
	st := &countingStore{Store: openStore(t, filepath.Join(t.TempDir(), "db"))}
	r := usage.New(st, usage.Options{FlushInterval: time.Hour})
	defer r.Close(ctx)
	r.Record("k", "m", 10, 1, 0)
	st.fail.Store(true)
	if err := r.Flush(ctx); err == nil {
		t.Fatal("flush to a failing store succeeded")
	}
	r.Record("k", "m", 5, 1, 0)
	st.fail.Store(false)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rows, _ := r.Query(ctx, usage.Query{})
	if rows[0].Requests != 2 || rows[0].PromptTokens != 15 {
		t.Errorf("after a failed flush: %+v", rows)
	}
}

// TestCloseLosesNothing records from many goroutines, closes, reopens the
// database and finds every request.
func TestCloseLosesNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db")
	st := openStore(t, path)
	r := usage.New(st, usage.Options{FlushInterval: 5 * time.Millisecond})
	var wg sync.WaitGroup
	const workers, each = 8, 2000
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r.Record("key", "model", 3, 2, 0.5)
			}
		}()
	}
	wg.Wait()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st = openStore(t, path)
	defer st.Close()
	r2 := usage.New(st, usage.Options{})
	defer r2.Close(ctx)
	rows, err := r2.Query(ctx, usage.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Requests != workers*each || rows[0].PromptTokens != 3*workers*each || rows[0].CostUSD != 0.5*workers*each {
		t.Errorf("after restart: %+v", rows[0])
	}
}

func BenchmarkRecord(b *testing.B) {
	st := openStore(b, filepath.Join(b.TempDir(), "db"))
	defer st.Close()
	r := usage.New(st, usage.Options{})
	defer r.Close(context.Background())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Record("key_0123456789", "openai/gpt-4o-mini", 120, 40, 0.0001)
		}
	})
}

func TestRoundUSD(t *testing.T) {
	tests := []struct {
		name string
		in   float64
		want string // as encoding/json writes it
	}{
		{"470 tokens at $0.15 per million", 470 * 0.15 / 1e6, "0.0000705"},
		{"float noise from a sum", 0.1 + 0.2, "0.3"},
		{"below the quantum rounds to zero", 4e-11, "0"},
		{"half a quantum rounds away from zero", 5e-11, "1e-10"},
		{"a large cost keeps its cents", 12345.67 + 0.01, "12345.68"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := json.Marshal(usage.RoundUSD(tt.in))
			if string(b) != tt.want {
				t.Fatalf("RoundUSD(%v) encodes as %s, want %s", tt.in, b, tt.want)
			}
		})
	}
}

// TestSummedCostsAreExactDecimals checks that costs recorded many times
// sum to the decimal they make, in memory and after a flush.
func TestSummedCostsAreExactDecimals(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	defer st.Close()
	r := usage.New(st, usage.Options{})
	defer r.Close(ctx)
	cost := usage.RoundUSD(470 * 0.15 / 1e6) // 0.0000705
	for range 1000 {
		r.Record("key", "m", 470, 0, cost)
	}
	for _, flush := range []bool{false, true} {
		if flush {
			if err := r.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			r.Record("key", "m", 470, 0, cost)
		}
		rows, err := r.Query(ctx, usage.Query{})
		if err != nil {
			t.Fatal(err)
		}
		want := "0.0705"
		if flush {
			want = "0.0705705"
		}
		if b, _ := json.Marshal(rows[0].CostUSD); string(b) != want {
			t.Fatalf("flushed %v: cost %s, want %s", flush, b, want)
		}
	}
}
