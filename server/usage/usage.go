// Package usage records language-model usage per credential, model and
// UTC hour: requests, prompt and completion tokens, and cost in USD.
//
// Record is cheap and never touches the disk: it adds to an in-memory
// aggregate. A background loop flushes the aggregate to the store (bucket
// "usage") in one transaction per interval, and Close flushes what is left,
// so nothing recorded before a graceful shutdown is lost. A failed flush
// keeps its totals in memory and retries on the next tick, under the same
// batch id, so that a flush whose commit was in doubt is never counted
// twice. Several replicas' Recorders may flush into one store.
//
// Query reads the stored totals plus what is still in memory, filtered by
// time range, credential and model, and grouped by any of key, model, day
// and hour.
package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/batch"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// Bucket is the store bucket holding hourly totals.
const Bucket = "usage"

// DefaultFlushInterval is how often Recorder writes to the store.
const DefaultFlushInterval = 5 * time.Second

// keySep separates the parts of a stored key; it cannot appear in a
// credential id and never does in a model id.
const keySep = "\x1f"

// hourLayout is the time part of a stored key; it sorts chronologically.
const hourLayout = "2006010215"

// CostQuantum is the precision of every cost Switchboard reports, in USD:
// a call's cost and every sum of costs are rounded to it (half away from
// zero), so that they read as the decimals they are (0.0000705, not
// 0.00007049999999999998). A price per million tokens with up to four
// decimals times a token count is exact at this precision.
const CostQuantum = 1e-10

// RoundUSD rounds a cost in USD to CostQuantum. The result is the float
// nearest to a decimal with at most ten decimals, which JSON encodes as
// that decimal (for costs below about $100,000, where float64 still
// holds ten decimals).
func RoundUSD(usd float64) float64 {
	// Dividing the whole number of quanta by 1e10, an exact float, gives
	// the float nearest to the decimal; multiplying by 1e-10 would not.
	return math.Round(usd*costScale) / costScale
}

// costScale is 1/CostQuantum.
const costScale = 1e10

// AddUSD is a + b rounded to CostQuantum.
func AddUSD(a, b float64) float64 { return RoundUSD(a + b) }

// Totals are summed usage.
type Totals struct {
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"promptTokens"`
	CompletionTokens int64   `json:"completionTokens"`
	CostUSD          float64 `json:"costUsd"`
}

func (t *Totals) add(o Totals) {
	t.Requests += o.Requests
	t.PromptTokens += o.PromptTokens
	t.CompletionTokens += o.CompletionTokens
	t.CostUSD = AddUSD(t.CostUSD, o.CostUSD)
}

type key struct {
	principal string
	model     string
	hour      int64 // unix seconds of the hour's start
}

func (k key) String() string {
	return time.Unix(k.hour, 0).UTC().Format(hourLayout) + keySep + k.principal + keySep + k.model
}

func parseKey(s string) (key, bool) {
	parts := strings.SplitN(s, keySep, 3)
	if len(parts) != 3 {
		return key{}, false
	}
	t, err := time.Parse(hourLayout, parts[0])
	if err != nil {
		return key{}, false
	}
	return key{principal: parts[1], model: parts[2], hour: t.Unix()}, true
}

// Options configure a Recorder.
type Options struct {
	// FlushInterval; DefaultFlushInterval when 0.
	FlushInterval time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Logger reports failed flushes; slog.Default when nil.
	Logger *slog.Logger
}

// Recorder aggregates usage in memory and flushes it to the store.
type Recorder struct {
	st       store.Store
	now      func() time.Time
	log      *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	pending map[key]*Totals
	// unsent are the batches taken from pending whose flush failed,
	// oldest first; guarded by mu, changed only under flushMu.
	unsent []unsentBatch

	flushMu sync.Mutex // one flush (or query) at a time

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// unsentBatch is a batch of totals and its id (see batch.Claim).
type unsentBatch struct {
	id     string
	totals map[key]*Totals
}

// New starts a Recorder writing to st.
func New(st store.Store, o Options) *Recorder {
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	r := &Recorder{st: st, now: o.Now, log: o.Logger, interval: o.FlushInterval,
		pending: map[key]*Totals{}, stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	return r
}

// Record adds one request's usage for a credential and model to the
// current hour. It never blocks on I/O.
func (r *Recorder) Record(principalID, model string, promptTokens, completionTokens int, costUSD float64) {
	t := r.now().UTC()
	k := key{principal: principalID, model: model, hour: t.Unix() - t.Unix()%3600}
	r.mu.Lock()
	tot := r.pending[k]
	if tot == nil {
		tot = &Totals{}
		r.pending[k] = tot
	}
	tot.Requests++
	tot.PromptTokens += int64(promptTokens)
	tot.CompletionTokens += int64(completionTokens)
	tot.CostUSD = AddUSD(tot.CostUSD, costUSD)
	r.mu.Unlock()
}

func (r *Recorder) loop() {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), r.interval+10*time.Second)
			if err := r.Flush(ctx); err != nil {
				r.log.Error("usage flush failed; totals kept in memory for the next attempt", "error", err.Error())
			}
			cancel()
		}
	}
}

// Flush adds the in-memory totals to the stored ones in one transaction.
// On failure they stay in memory and the next Flush writes them again,
// under the same batch id: if the failed transaction committed after all
// (its outcome was unknown), the id's claim makes the second write skip
// them, so that nothing is counted twice. Recorders of several replicas
// flushing into one store add up: each flush reads and writes the totals
// in one serializable transaction.
func (r *Recorder) Flush(ctx context.Context) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	if len(r.pending) > 0 {
		r.unsent = append(r.unsent, unsentBatch{id: batch.NewID(r.now()), totals: r.pending})
		r.pending = map[key]*Totals{}
	}
	batches := r.unsent
	r.mu.Unlock()
	if len(batches) == 0 {
		return nil
	}
	err := r.st.Update(ctx, func(tx store.Tx) error {
		for _, b := range batches {
			if fresh, err := batch.Claim(tx, b.id); err != nil {
				return err
			} else if !fresh {
				continue
			}
			for k, add := range b.totals {
				ks := k.String()
				var cur Totals
				if v := tx.Get(Bucket, ks); v != nil {
					if err := json.Unmarshal(v, &cur); err != nil {
						return fmt.Errorf("decode usage %q: %w", ks, err)
					}
				}
				cur.add(*add)
				if err := store.PutJSON(tx, Bucket, ks, cur); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil {
		r.mu.Lock()
		r.unsent = r.unsent[len(batches):]
		r.mu.Unlock()
	}
	return err
}

// Close stops the flush loop and flushes what is left.
func (r *Recorder) Close(ctx context.Context) error {
	r.stopOnce.Do(func() { close(r.stop) })
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return r.Flush(ctx)
}

// Grouping dimensions for Query.
const (
	GroupKey   = "key"
	GroupModel = "model"
	GroupDay   = "day"
	GroupHour  = "hour"
)

// Query selects usage.
type Query struct {
	// From and To bound the hours included: From <= hour start < To.
	// Zero values mean unbounded.
	From, To time.Time
	// PrincipalID, when set, keeps only that credential's usage.
	PrincipalID string
	// Model, when set, keeps only that model's usage.
	Model string
	// GroupBy lists dimensions to keep apart (key, model, day, hour); the
	// others are summed over. Empty sums everything into one row.
	GroupBy []string
}

// Row is one group of Query's answer. Fields of dimensions not grouped by
// are empty (Period is zero unless grouped by day or hour).
type Row struct {
	PrincipalID      string    `json:"principalId,omitempty"`
	Model            string    `json:"model,omitempty"`
	Period           time.Time `json:"period,omitzero"`
	Requests         int64     `json:"requests"`
	PromptTokens     int64     `json:"promptTokens"`
	CompletionTokens int64     `json:"completionTokens"`
	TotalTokens      int64     `json:"totalTokens"`
	CostUSD          float64   `json:"costUsd"`
}

// Query sums usage over q's range and filters, grouped by q.GroupBy,
// including totals not yet flushed. Rows are sorted by period, key, model.
func (r *Recorder) Query(ctx context.Context, q Query) ([]Row, error) {
	var byKey, byModel, byDay, byHour bool
	for _, g := range q.GroupBy {
		switch g {
		case GroupKey:
			byKey = true
		case GroupModel:
			byModel = true
		case GroupDay:
			byDay = true
		case GroupHour:
			byHour = true
		default:
			return nil, errs.Problems("invalid usage query", []errs.Problem{{Field: "groupBy", Problem: fmt.Sprintf("unknown value %q (one of key, model, day, hour)", g)}})
		}
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return nil, errs.Problems("invalid usage query", []errs.Problem{{Field: "to", Problem: "must be after from"}})
	}
	type gkey struct {
		principal, model string
		period           int64
	}
	groups := map[gkey]*Totals{}
	include := func(k key, t Totals) {
		if !q.From.IsZero() && k.hour < q.From.Unix()-q.From.Unix()%3600 {
			return
		}
		if !q.To.IsZero() && k.hour >= q.To.Unix() {
			return
		}
		if q.PrincipalID != "" && k.principal != q.PrincipalID {
			return
		}
		if q.Model != "" && k.model != q.Model {
			return
		}
		var g gkey
		if byKey {
			g.principal = k.principal
		}
		if byModel {
			g.model = k.model
		}
		switch {
		case byHour:
			g.period = k.hour
		case byDay:
			g.period = k.hour - k.hour%86400
		default:
			g.period = -1
		}
		tot := groups[g]
		if tot == nil {
			tot = &Totals{}
			groups[g] = tot
		}
		tot.add(t)
	}

	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	after := ""
	if !q.From.IsZero() {
		after = q.From.UTC().Format(hourLayout)
	}
	err := r.st.View(ctx, func(tx store.Tx) error {
		return tx.Scan(Bucket, "", after, func(ks string, v []byte) (bool, error) {
			k, ok := parseKey(ks)
			if !ok {
				return true, nil
			}
			if !q.To.IsZero() && k.hour >= q.To.Unix() {
				return false, nil
			}
			var t Totals
			if err := json.Unmarshal(v, &t); err != nil {
				return false, fmt.Errorf("decode usage %q: %w", ks, err)
			}
			include(k, t)
			return true, nil
		})
	})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	for k, t := range r.pending {
		include(k, *t)
	}
	unsent := r.unsent
	r.mu.Unlock()
	// A batch whose flush failed counts unless its claim shows that the
	// flush committed after all (then the scan above counted it).
	if len(unsent) > 0 {
		if err := r.st.View(ctx, func(tx store.Tx) error {
			for _, b := range unsent {
				if batch.Claimed(tx, b.id) {
					continue
				}
				for k, t := range b.totals {
					include(k, *t)
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}

	rows := make([]Row, 0, len(groups))
	for g, t := range groups {
		row := Row{PrincipalID: g.principal, Model: g.model, Requests: t.Requests, PromptTokens: t.PromptTokens,
			CompletionTokens: t.CompletionTokens, TotalTokens: t.PromptTokens + t.CompletionTokens, CostUSD: t.CostUSD}
		if g.period >= 0 {
			row.Period = time.Unix(g.period, 0).UTC()
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if !a.Period.Equal(b.Period) {
			return a.Period.Before(b.Period)
		}
		if a.PrincipalID != b.PrincipalID {
			return a.PrincipalID < b.PrincipalID
		}
		return a.Model < b.Model
	})
	if len(q.GroupBy) == 0 && len(rows) == 0 {
		rows = append(rows, Row{})
	}
	return slices.Clip(rows), nil
}
