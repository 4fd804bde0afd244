package llm

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
)

// callInfo is one gateway call as its events describe it.
type callInfo struct {
	op        string // operation name (OpName)
	requested string // the model id asked for
	stream    bool
	start     time.Time
	// failed lists the models that failed or were skipped, in order.
	failed []FailedModel
}

// FailedModel is a model a call tried (or skipped) without an answer.
type FailedModel struct {
	Model string `json:"model"`
	// Code is the error code of its failure; "unavailable" when its
	// provider's circuit breaker was open and it was skipped.
	Code string `json:"code"`
}

// fallbackFrom returns the ids of the failed models (nil when none).
func (c *callInfo) fallbackFrom() []string {
	if len(c.failed) == 0 {
		return nil
	}
	ids := make([]string, len(c.failed))
	for i, f := range c.failed {
		ids[i] = f.Model
	}
	return ids
}

// OpName is the operation name events carry.
func (op Op) OpName() string {
	switch op {
	case OpGenerate:
		return "generate"
	case OpChat, OpChatLoop:
		return "chat"
	case OpFunctions, OpFunctionsLoop:
		return "function-calling"
	case OpCompatChat:
		return "openai.chat.completions"
	case OpCompatCompletion:
		return "openai.completions"
	case OpResponses:
		return "openai.responses"
	case OpMessages:
		return "anthropic.messages"
	}
	return "unknown"
}

func principalID(ctx context.Context) string {
	if p := auth.FromContext(ctx); p != nil {
		return p.ID
	}
	return ""
}

// attempt runs do on each candidate in order. It skips a model whose
// provider's circuit breaker is open, falls back to the next candidate on
// errors that allow it (429, 5xx, connection errors, timeouts), reports
// every outcome to the provider's breaker, and emits llm.fallback_used
// when a model failed and another was tried. When every candidate was
// skipped, the error is a 503 unavailable naming the providers and when
// they will be tried again (Retry-After).
func attempt[T any](ctx context.Context, g *Gateway, c *callInfo, cands []*Model, do func(*Model) (T, error)) (T, *Model, error) {
	var zero T
	var lastErr error
	var last *Model
	var down []string
	var retryAt time.Time
	for i, cand := range cands {
		b := g.Breakers.For(cand.Provider)
		if ok, at := b.Allow(g.Breakers.Now()); !ok {
			c.failed = append(c.failed, FailedModel{Model: cand.ID, Code: string(errs.Unavailable)})
			down = append(down, cand.Provider)
			if retryAt.IsZero() || at.Before(retryAt) {
				retryAt = at
			}
			continue
		}
		res, err := do(cand)
		if t, ok := b.Record(g.Breakers.Now(), err); ok {
			g.breakerChanged(t)
		}
		if err == nil {
			if len(c.failed) > 0 {
				g.emitFallback(ctx, c, cand)
			}
			return res, cand, nil
		}
		last, lastErr = cand, err
		c.failed = append(c.failed, FailedModel{Model: cand.ID, Code: string(errs.KindOf(err))})
		if !canFallBack(err) {
			break
		}
		if i < len(cands)-1 {
			g.log().LogAttrs(ctx, slog.LevelWarn, "llm fallback", slog.String("requestId", requestid.From(ctx)),
				slog.String("model", cand.ID), slog.String("error", err.Error()))
		}
	}
	if lastErr == nil {
		lastErr = unavailable(down, retryAt, g.Breakers.Now())
	}
	if len(c.failed) > 1 {
		g.emitFallback(ctx, c, nil)
	}
	if last == nil {
		last = cands[0]
	}
	g.completed(ctx, c, last, Usage{}, 0, lastErr)
	return zero, nil, lastErr
}

// unavailable is the 503 of a call whose every candidate's provider is
// known to be down.
func unavailable(providers []string, retryAt, now time.Time) error {
	secs := max(1, int(math.Ceil(retryAt.Sub(now).Seconds())))
	uniq := providers[:0:0]
	for _, p := range providers {
		if len(uniq) == 0 || uniq[len(uniq)-1] != p {
			uniq = append(uniq, p)
		}
	}
	which := "provider " + quoteJoin(uniq)
	if len(uniq) > 1 {
		which = "providers " + quoteJoin(uniq)
	}
	e := errs.E(errs.Unavailable, "%s is down (its circuit breaker opened after repeated failures) and no fallback model is available; Switchboard tries it again in %d s (configure fallbacks on another provider to keep answering)", which, secs).
		WithDetails(map[string]any{"providers": uniq, "retryAt": retryAt.UTC().Format(time.RFC3339), "retryAfterSeconds": secs})
	e.RetryAfter = time.Duration(secs) * time.Second
	return e
}

func quoteJoin(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = `"` + s + `"`
	}
	return strings.Join(q, ", ")
}

// Event payloads. None carries a prompt, an output or a secret.
type (
	fallbackUsedData struct {
		RequestID      string        `json:"requestId"`
		Key            string        `json:"key"`
		RequestedModel string        `json:"requestedModel"`
		Model          *string       `json:"model"`
		Succeeded      bool          `json:"succeeded"`
		Failed         []FailedModel `json:"failed"`
	}
	providerUnhealthyData struct {
		Provider      string    `json:"provider"`
		Failures      int       `json:"failures"`
		LastErrorCode string    `json:"lastErrorCode"`
		RetryAt       time.Time `json:"retryAt"`
	}
	providerRecoveredData struct {
		Provider  string `json:"provider"`
		DownForMs int64  `json:"downForMs"`
	}
	requestCompletedData struct {
		RequestID        string  `json:"requestId"`
		Key              string  `json:"key"`
		Model            string  `json:"model"`
		RequestedModel   string  `json:"requestedModel"`
		Operation        string  `json:"operation"`
		Stream           bool    `json:"stream"`
		Status           string  `json:"status"`
		ErrorCode        string  `json:"errorCode,omitempty"`
		PromptTokens     int     `json:"promptTokens"`
		CompletionTokens int     `json:"completionTokens"`
		TotalTokens      int     `json:"totalTokens"`
		Estimated        bool    `json:"estimated"`
		CostUSD          float64 `json:"costUsd"`
		LatencyMs        float64 `json:"latencyMs"`
	}
)

// emitFallback emits llm.fallback_used; answered is nil when every
// candidate failed.
func (g *Gateway) emitFallback(ctx context.Context, c *callInfo, answered *Model) {
	if g.Events == nil {
		return
	}
	d := fallbackUsedData{RequestID: requestid.From(ctx), Key: principalID(ctx), RequestedModel: c.requested,
		Succeeded: answered != nil, Failed: append([]FailedModel(nil), c.failed...)}
	if answered != nil {
		d.Model = &answered.ID
	}
	g.Events.Emit(events.Pending{Type: events.FallbackUsed, Data: d})
}

// breakerChanged logs a breaker's transition and emits its event.
func (g *Gateway) breakerChanged(t Transition) {
	if t.Opened {
		g.log().Warn("llm provider is down; its models are skipped until a trial call succeeds",
			"provider", t.Provider, "failures", t.Failures, "lastErrorCode", t.LastErrorCode, "retryAt", t.RetryAt.UTC().Format(time.RFC3339))
		if g.Events != nil {
			g.Events.Emit(events.Pending{Type: events.ProviderUnhealthy, Data: providerUnhealthyData{
				Provider: t.Provider, Failures: t.Failures, LastErrorCode: t.LastErrorCode, RetryAt: t.RetryAt.UTC().Truncate(time.Millisecond)}})
		}
		return
	}
	g.log().Info("llm provider recovered", "provider", t.Provider, "downFor", t.DownFor.String())
	if g.Events != nil {
		g.Events.Emit(events.Pending{Type: events.ProviderRecovered, Data: providerRecoveredData{Provider: t.Provider, DownForMs: t.DownFor.Milliseconds()}})
	}
}

// wantsCompleted reports whether llm.request.completed is worth building:
// an event sink is set and, when the gateway can tell, a webhook listens.
func (g *Gateway) wantsCompleted() bool {
	return g.Events != nil && (g.Subscribed == nil || g.Subscribed(events.LLMRequestCompleted))
}

// completed emits the opt-in llm.request.completed for one call (err nil
// on success).
func (g *Gateway) completed(ctx context.Context, c *callInfo, m *Model, u Usage, cost float64, err error) {
	if !g.wantsCompleted() {
		return
	}
	d := requestCompletedData{
		RequestID: requestid.From(ctx), Key: principalID(ctx), Model: m.ID, RequestedModel: c.requested,
		Operation: c.op, Stream: c.stream, Status: "succeeded",
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.Total(), Estimated: u.Estimated,
		CostUSD: cost, LatencyMs: float64(time.Since(c.start).Microseconds()) / 1000,
	}
	if err != nil {
		d.Status, d.ErrorCode = "failed", string(errs.KindOf(err))
	}
	g.Events.Emit(events.Pending{Type: events.LLMRequestCompleted, Data: d})
}
