package llm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
)

// Recorder receives the usage of every upstream call (server/usage
// implements it). It must not block: it is called on the request path.
type Recorder interface {
	Record(principalID, model string, promptTokens, completionTokens int, costUSD float64)
}

// Admission lets a rate limiter or a budget admit a call before it goes
// upstream and settle it afterwards with the model that actually answered
// (a fallback may have another price; nil when none did) and its usage.
// Admit returns an error (e.g. errs.RateLimited with RetryAfter) to refuse
// the call.
type Admission interface {
	Admit(ctx context.Context, model *Model, req *Request) (settle func(answered *Model, u Usage), err error)
}

// Op is the kind of text operation; it decides the capability needed and
// which message roles are accepted.
type Op int

// Operations.
const (
	// OpGenerate is /v1/generate: Prompt, a chat or completion model.
	OpGenerate Op = iota
	// OpChat is /v1/chat: system, user and assistant messages.
	OpChat
	// OpFunctions is /v1/function-calling.
	OpFunctions
	// OpCompatChat is /openai/v1/chat/completions: tool turns and tools too.
	OpCompatChat
	// OpCompatCompletion is /openai/v1/completions.
	OpCompatCompletion
	// OpChatLoop is a later model call of /v1/chat's tool loop: its
	// conversation also carries the assistant's tool calls and the tool
	// turns that answer them.
	OpChatLoop
	// OpFunctionsLoop is a later model call of /v1/function-calling's
	// tool loop (as OpChatLoop).
	OpFunctionsLoop
	// OpResponses is /openai/v1/responses: tool turns and tools.
	OpResponses
	// OpMessages is /anthropic/v1/messages: tool turns and tools.
	OpMessages
)

// toolTurns reports whether op's conversations may carry tool turns.
func (op Op) toolTurns() bool {
	switch op {
	case OpCompatChat, OpChatLoop, OpFunctionsLoop, OpResponses, OpMessages:
		return true
	}
	return false
}

func (op Op) generation() bool { return op == OpGenerate || op == OpCompatCompletion }

// Gateway runs requests against the catalog's providers.
type Gateway struct {
	Catalog *Catalog
	// Usage records usage per credential and model; optional.
	Usage Recorder
	// Admission, when set, is consulted before each call.
	Admission Admission
	// Log receives one line per call (debug; info when tokens were
	// estimated or a fallback was used).
	Log *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Events receives the model service's events (llm.fallback_used,
	// llm.provider_unhealthy, llm.provider_recovered,
	// llm.request.completed); optional.
	Events events.Emitter
	// Subscribed, when set, reports whether a webhook listens to an opt-in
	// event type, so that llm.request.completed is built only then.
	Subscribed func(eventType string) bool
	// Breakers holds each provider's circuit breaker; nil breaks nothing.
	Breakers *Breakers
	// KeepAlive is how long a stream may stay silent before its writer
	// sends a keep-alive (DefaultKeepAlive when 0), so that proxies between
	// the caller and Switchboard do not cut a slow model's stream.
	KeepAlive time.Duration
	// Images fetches the https image URLs of requests whose providers
	// need image bytes (see images.go); nil fetches through a guard that
	// refuses every special-purpose address range.
	Images *ImageFetcher
}

// DefaultKeepAlive is the default of Gateway.KeepAlive.
const DefaultKeepAlive = 15 * time.Second

func (g *Gateway) now() time.Time {
	if g.Now != nil {
		return g.Now().UTC()
	}
	return time.Now().UTC()
}

func (g *Gateway) log() *slog.Logger {
	if g.Log != nil {
		return g.Log
	}
	return slog.Default()
}

// NewID returns prefix followed by 24 random hex digits.
func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	buf := make([]byte, len(prefix)+24)
	copy(buf, prefix)
	hex.Encode(buf[len(prefix):], b[:])
	return string(buf)
}

// Result is a finished text call.
type Result struct {
	// Model is the model that answered (a fallback when the first failed).
	Model        *Model
	Text         string
	ToolCalls    []ToolCall
	FinishReason string
	// Logprobs is the upstream's logprobs of the first choice, verbatim.
	Logprobs json.RawMessage
	// More are the choices after the first (Request.N > 1).
	More []Choice
	// Output is the check of Text against the request's response format;
	// nil when it asked for none or the model called tools.
	Output    *OutputCheck
	Usage     Usage
	CreatedAt time.Time
	// FallbackFrom lists the models that failed before Model answered.
	FallbackFrom []string
}

// capabilityError is the 400 for a model without the needed capability.
func capabilityError(m *Model, need string) error {
	return errs.E(errs.Invalid, "model %s does not support %s (its capabilities: %s)", m.ID, need, strings.Join(m.Capabilities, ", ")).
		WithDetails(map[string]any{"model": m.ID, "capability": need, "capabilities": m.Capabilities})
}

// needs returns the capability an op needs and whether m has it.
func (op Op) supportedBy(m *Model) (string, bool) {
	if op.generation() {
		return CapChat + " or " + CapCompletion, m.Has(CapChat) || m.Has(CapCompletion)
	}
	return CapChat, m.Has(CapChat)
}

// prepare validates r for op and resolves its model: 422 listing every
// invalid field and out-of-range knob, 404 for an unknown model, 403 for a
// model outside the caller's policy (before any other problem), 400 for a
// model lacking the capability.
func (g *Gateway) prepare(ctx context.Context, op Op, r *Request) (*Model, error) {
	var ps []errs.Problem
	if strings.TrimSpace(r.Model) == "" {
		ps = append(ps, errs.Problem{Field: "model", Problem: "is required"})
	}
	if op.generation() {
		if r.Prompt == "" {
			ps = append(ps, errs.Problem{Field: "prompt", Problem: "is required"})
		}
	} else {
		ps = append(ps, messageProblems(op, r.Messages)...)
	}
	ps = append(ps, knobProblems(r)...)
	r.format = nil
	if r.ResponseFormat != nil {
		f, fps := compileFormat(r.ResponseFormat)
		ps = append(ps, fps...)
		r.format = f
	}
	if r.ToolChoice != nil && r.ToolChoice.Mode == ToolChoiceFunction {
		found := false
		for _, t := range r.Tools {
			found = found || t.Name == r.ToolChoice.Name
		}
		if !found {
			ps = append(ps, errs.Problem{Field: "toolChoice", Problem: fmt.Sprintf("names function %q, which is not among the tools", r.ToolChoice.Name)})
		}
	}
	var m *Model
	if strings.TrimSpace(r.Model) != "" {
		var err error
		m, err = g.Catalog.Resolve(r.Model)
		if err != nil {
			if len(ps) == 0 {
				return nil, err
			}
		} else {
			if err := allow(ctx, m); err != nil {
				return nil, err
			}
			if need, ok := op.supportedBy(m); !ok && len(ps) == 0 {
				return nil, capabilityError(m, need)
			}
			if fs := unsupportedFields(m, r); len(fs) > 0 && len(ps) == 0 {
				return nil, unsupportedError(m, fs)
			}
			ps = append(ps, maxTokensProblem(m, r)...)
		}
	}
	if err := errs.Problems("invalid request", ps); err != nil {
		return nil, err
	}
	if err := g.normaliseImages(ctx, op, m, r); err != nil {
		return nil, err
	}
	return m, nil
}

// messageProblems checks a conversation for op.
func messageProblems(op Op, msgs []Message) []errs.Problem {
	if len(msgs) == 0 {
		return []errs.Problem{{Field: "messages", Problem: "must contain at least one message"}}
	}
	if len(msgs) > MaxMessages {
		return []errs.Problem{{Field: "messages", Problem: fmt.Sprintf("at most %d messages", MaxMessages)}}
	}
	var ps []errs.Problem
	compat, toolTurns := op == OpCompatChat, op.toolTurns()
	for i, m := range msgs {
		at := func() string { return fmt.Sprintf("messages[%d]", i) } // only for a problem
		switch m.Role {
		case RoleSystem, RoleUser:
		case RoleAssistant:
		case RoleTool:
			if !toolTurns {
				ps = append(ps, errs.Problem{Field: at() + ".role", Problem: "must be system, user or assistant"})
			} else if m.ToolCallID == "" {
				ps = append(ps, errs.Problem{Field: at() + ".tool_call_id", Problem: "is required on tool messages"})
			}
		case "":
			ps = append(ps, errs.Problem{Field: at() + ".role", Problem: "is required"})
		default:
			allowed := "system, user or assistant"
			if compat {
				allowed = "system, developer, user, assistant or tool"
			}
			ps = append(ps, errs.Problem{Field: at() + ".role", Problem: fmt.Sprintf("must be %s, got %q", allowed, m.Role)})
		}
	}
	return ps
}

// unsupportedFields lists the fields of r that m's provider cannot carry.
func unsupportedFields(m *Model, r *Request) []string {
	if fc, ok := m.provider.(FieldChecker); ok {
		return fc.Unsupported(m, r)
	}
	return nil
}

// unsupportedError is the 400 for a request field m's provider would drop.
func unsupportedError(m *Model, fields []string) error {
	return errs.E(errs.Invalid, "%s is not supported by model %s (provider type %s); remove it or choose a model that supports it",
		strings.Join(fields, ", "), m.ID, m.Type()).
		WithDetails(map[string]any{"param": fields[0], "model": m.ID, "unsupported": fields})
}

// candidates returns m followed by its usable fallbacks (those outside the
// caller's policy, or whose provider cannot carry every field of r, or
// without vision for a request with images, are skipped).
func (g *Gateway) candidates(ctx context.Context, op Op, m *Model, r *Request) []*Model {
	out := []*Model{m}
	for _, id := range m.Fallbacks {
		f, err := g.Catalog.Lookup(id)
		if err != nil {
			continue
		}
		if _, ok := op.supportedBy(f); !ok || allow(ctx, f) != nil || len(unsupportedFields(f, r)) > 0 || !visionOK(f, r) {
			continue
		}
		out = append(out, f)
	}
	return out
}

func canFallBack(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.Fallback
}

// admit consults the Admission hook.
func (g *Gateway) admit(ctx context.Context, m *Model, r *Request) (func(*Model, Usage), error) {
	if g.Admission == nil {
		return func(*Model, Usage) {}, nil
	}
	settle, err := g.Admission.Admit(ctx, m, r)
	if err != nil {
		return nil, err
	}
	if settle == nil {
		settle = func(*Model, Usage) {}
	}
	return settle, nil
}

// Complete validates r and runs it to the end, trying fallbacks on 429,
// 5xx, connection errors and timeouts. Usage is recorded for the caller in
// ctx.
func (g *Gateway) Complete(ctx context.Context, op Op, r *Request) (*Result, error) {
	m, err := g.prepare(ctx, op, r)
	if err != nil {
		return nil, err
	}
	settle, err := g.admit(ctx, m, r)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	c := &callInfo{op: op.OpName(), requested: m.ID, start: start}
	resp, cand, err := attempt(ctx, g, c, g.candidates(ctx, op, m, r), func(cand *Model) (*Response, error) {
		resp, err := cand.provider.Complete(ctx, cand, r)
		if err != nil {
			observe(cand, Usage{}, time.Since(start), err)
		}
		return resp, err
	})
	if err != nil {
		settle(nil, Usage{})
		return nil, err
	}
	res := &Result{Model: cand, Text: resp.Text, ToolCalls: resp.ToolCalls, FinishReason: resp.FinishReason, Logprobs: resp.Logprobs,
		More: resp.More, CreatedAt: g.now(), FallbackFrom: c.fallbackFrom()}
	res.ToolCalls = oneCallUnlessParallel(r, res.ToolCalls)
	res.FinishReason = finishReason(res.FinishReason, res.ToolCalls)
	completeCalls(res.ToolCalls)
	for i := range res.More {
		res.More[i].FinishReason = finishReason(res.More[i].FinishReason, res.More[i].ToolCalls)
		completeCalls(res.More[i].ToolCalls)
	}
	if resp.Usage != nil {
		res.Usage = *resp.Usage
	} else {
		res.Usage = Usage{
			PromptTokens:     estimatePromptTokens(cand.Name, r),
			CompletionTokens: res.estimateOutputTokens(),
			Estimated:        true,
		}
	}
	g.account(ctx, c, cand, res.Usage)
	settle(cand, res.Usage)
	if res.Output = checkOutput(r, res.Text, res.ToolCalls); res.Output.Failed() {
		return nil, outputError(cand, res.Output)
	}
	return res, nil
}

// oneCallUnlessParallel keeps only the first of several tool calls when
// the request turned parallel tool calls off, for providers (Gemini) that
// have no such switch.
func oneCallUnlessParallel(r *Request, calls []ToolCall) []ToolCall {
	if len(calls) > 1 && r.ParallelToolCalls != nil && !*r.ParallelToolCalls {
		return calls[:1]
	}
	return calls
}

// finishReason is the upstream's finish reason, or the one implied by the
// output when it gave none.
func finishReason(upstream string, calls []ToolCall) string {
	switch {
	case upstream != "":
		return upstream
	case len(calls) > 0:
		return FinishToolCalls
	}
	return FinishStop
}

// completeCalls gives every tool call arguments ("{}" when empty) and an id.
func completeCalls(calls []ToolCall) {
	fillArguments(calls)
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = NewID("call_")
		}
	}
}

// fillArguments gives every tool call without arguments "{}".
func fillArguments(calls []ToolCall) {
	for i := range calls {
		if strings.TrimSpace(calls[i].Arguments) == "" {
			calls[i].Arguments = "{}"
		}
	}
}

// estimateOutputTokens counts the tokens of every choice's output, for an
// upstream that reported no usage.
func (res *Result) estimateOutputTokens() int {
	n := estimateCompletionTokens(res.Model.Name, res.Text, res.ToolCalls)
	for _, ch := range res.More {
		n += estimateCompletionTokens(res.Model.Name, ch.Text, ch.ToolCalls)
	}
	return n
}

// account records usage, logs the call and emits llm.request.completed.
func (g *Gateway) account(ctx context.Context, c *callInfo, m *Model, u Usage) {
	g.accountErr(ctx, c, m, u, nil)
}

// accountErr is account for a call that ended with err (a stream that
// failed midway; nil on success).
func (g *Gateway) accountErr(ctx context.Context, c *callInfo, m *Model, u Usage, callErr error) {
	d, fallbackFrom, stream := time.Since(c.start), c.fallbackFrom(), c.stream
	principal := principalID(ctx)
	cost := m.Cost(u)
	if g.Usage != nil {
		g.Usage.Record(principal, m.ID, u.PromptTokens, u.CompletionTokens, cost)
	}
	observe(m, u, d, callErr)
	g.completed(ctx, c, m, u, cost, callErr)
	level := slog.LevelDebug
	if u.Estimated || len(fallbackFrom) > 0 {
		level = slog.LevelInfo
	}
	log := g.log()
	if !log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("requestId", requestid.From(ctx)),
		slog.String("principal", principal),
		slog.String("model", m.ID),
		slog.Int("promptTokens", u.PromptTokens),
		slog.Int("completionTokens", u.CompletionTokens),
		slog.Bool("estimated", u.Estimated),
		slog.Float64("costUsd", cost),
		slog.Bool("stream", stream),
		slog.Float64("durationMs", float64(d.Microseconds())/1000),
	}
	if len(fallbackFrom) > 0 {
		attrs = append(attrs, slog.String("fallbackFrom", strings.Join(fallbackFrom, ",")))
	}
	log.LogAttrs(ctx, level, "llm call", attrs...)
}

// ResultStream is a streamed text call. Read it with Next until io.EOF (or
// an error), then Close it; Close records the usage exactly once, also when
// the caller went away early.
type ResultStream struct {
	g      *Gateway
	ctx    context.Context
	cancel context.CancelFunc
	req    *Request
	model  *Model
	up     Stream
	settle func(*Model, Usage)
	call   *callInfo
	err    error // the error that ended the stream early, if any

	// CreatedAt is when the stream opened.
	CreatedAt time.Time

	text     strings.Builder
	calls    []ToolCall
	more     []Choice
	finish   string
	upUsage  *Usage
	finished bool
	once     sync.Once
}

// Model is the model answering (a fallback when the first failed to open).
func (s *ResultStream) Model() *Model { return s.model }

// Stream validates r and opens a stream, trying fallbacks while the
// upstream refuses to open one.
func (g *Gateway) Stream(ctx context.Context, op Op, r *Request) (*ResultStream, error) {
	m, err := g.prepare(ctx, op, r)
	if err != nil {
		return nil, err
	}
	settle, err := g.admit(ctx, m, r)
	if err != nil {
		return nil, err
	}
	c := &callInfo{op: op.OpName(), requested: m.ID, stream: true, start: time.Now()}
	// sctx lets Cancel abort a read blocked on the upstream.
	sctx, cancel := context.WithCancel(ctx)
	up, cand, err := attempt(ctx, g, c, g.candidates(ctx, op, m, r), func(cand *Model) (Stream, error) {
		return cand.provider.Stream(sctx, cand, r)
	})
	if err != nil {
		cancel()
		settle(nil, Usage{})
		return nil, err
	}
	return &ResultStream{g: g, ctx: ctx, cancel: cancel, req: r, model: cand, up: up, settle: settle, call: c, CreatedAt: g.now()}, nil
}

// KeepAlive is how long the stream may stay silent before its writer
// should send a keep-alive.
func (s *ResultStream) KeepAlive() time.Duration {
	if s.g.KeepAlive > 0 {
		return s.g.KeepAlive
	}
	return DefaultKeepAlive
}

// Cancel aborts the stream: a Next blocked on the upstream returns, with
// an error. A writer whose caller went away calls it from another
// goroutine (Next itself is not safe for concurrent use).
func (s *ResultStream) Cancel() { s.cancel() }

// Next returns the next chunk, io.EOF after the last one. Tool-call
// deltas are passed on and accumulated for Result.
func (s *ResultStream) Next() (Chunk, error) {
	if s.finished {
		return Chunk{}, io.EOF
	}
	c, err := s.up.Next()
	if err != nil {
		if err == io.EOF {
			s.finished = true
		} else if err != ErrClientGone {
			s.err = err
		}
		return Chunk{}, err
	}
	if len(c.ToolCalls) > 0 && s.req.ParallelToolCalls != nil && !*s.req.ParallelToolCalls {
		// One call only (see oneCallUnlessParallel): drop the deltas of later ones.
		c.ToolCalls = slices.DeleteFunc(slices.Clone(c.ToolCalls), func(d ToolCallDelta) bool { return d.Index > 0 })
	}
	if c.Choice > 0 {
		s.addMore(c)
	} else {
		s.text.WriteString(c.Text)
		s.calls = addCallDeltas(s.calls, c.ToolCalls)
		if c.FinishReason != "" {
			s.finish = c.FinishReason
		}
	}
	if c.Usage != nil {
		u := *c.Usage
		s.upUsage = &u
	}
	return c, nil
}

// addCallDeltas applies tool-call deltas to the calls accumulated so far.
func addCallDeltas(calls []ToolCall, deltas []ToolCallDelta) []ToolCall {
	for _, d := range deltas {
		for len(calls) <= d.Index {
			calls = append(calls, ToolCall{})
		}
		tc := &calls[d.Index]
		if d.ID != "" {
			tc.ID = d.ID
		}
		if d.Name != "" {
			tc.Name = d.Name
		}
		tc.Arguments += d.Arguments
	}
	return calls
}

// addMore accumulates a chunk of a choice after the first.
func (s *ResultStream) addMore(c Chunk) {
	for len(s.more) < c.Choice {
		s.more = append(s.more, Choice{})
	}
	ch := &s.more[c.Choice-1]
	ch.Text += c.Text
	ch.ToolCalls = addCallDeltas(ch.ToolCalls, c.ToolCalls)
	if c.FinishReason != "" {
		ch.FinishReason = c.FinishReason
	}
}

// Result returns what the stream produced so far, with usage (estimated
// for what the upstream did not report).
func (s *ResultStream) Result() *Result {
	res := &Result{Model: s.model, Text: s.text.String(), FinishReason: s.finish, CreatedAt: s.CreatedAt, FallbackFrom: s.call.fallbackFrom()}
	res.ToolCalls = make([]ToolCall, len(s.calls))
	copy(res.ToolCalls, s.calls)
	fillArguments(res.ToolCalls)
	if s.finished {
		res.FinishReason = finishReason(res.FinishReason, res.ToolCalls)
		res.Output = checkOutput(s.req, res.Text, res.ToolCalls)
	}
	for _, ch := range s.more {
		ch.ToolCalls = slices.Clone(ch.ToolCalls)
		fillArguments(ch.ToolCalls)
		if s.finished {
			ch.FinishReason = finishReason(ch.FinishReason, ch.ToolCalls)
		}
		res.More = append(res.More, ch)
	}
	if s.upUsage != nil && (s.finished || s.upUsage.CompletionTokens > 0) {
		res.Usage = *s.upUsage
	} else {
		res.Usage = Usage{Estimated: true, CompletionTokens: res.estimateOutputTokens()}
		if s.upUsage != nil && s.upUsage.PromptTokens > 0 {
			res.Usage.PromptTokens = s.upUsage.PromptTokens
		} else {
			res.Usage.PromptTokens = estimatePromptTokens(s.model.Name, s.req)
		}
	}
	return res
}

// Close releases the upstream and records usage (once).
func (s *ResultStream) Close() error {
	var err error
	s.once.Do(func() {
		err = s.up.Close()
		s.cancel()
		u := s.Result().Usage
		s.g.accountErr(s.ctx, s.call, s.model, u, s.err)
		s.settle(s.model, u)
	})
	return err
}

// EmbedResult is a finished embeddings call.
type EmbedResult struct {
	Model     *Model
	Vectors   [][]float32
	Usage     Usage
	CreatedAt time.Time
}

// Embed validates and runs an embeddings request for in.Inputs, or for
// in.Tokens (token arrays, decoded with the model's tokenizer for
// providers that take text; OpenAI-compatible upstreams receive the
// tokens). field names the request field for error messages: "text" or
// "input".
func (g *Gateway) Embed(ctx context.Context, model string, in EmbedRequest, field string) (*EmbedResult, error) {
	var ps []errs.Problem
	if strings.TrimSpace(model) == "" {
		ps = append(ps, errs.Problem{Field: "model", Problem: "is required"})
	}
	n := len(in.Inputs)
	if in.Tokens != nil {
		n = len(in.Tokens)
	}
	switch {
	case n == 0:
		ps = append(ps, errs.Problem{Field: field, Problem: "is required"})
	case n > MaxEmbeddingInputs:
		ps = append(ps, errs.Problem{Field: field, Problem: fmt.Sprintf("at most %d inputs", MaxEmbeddingInputs)})
	default:
		for i := 0; i < n; i++ {
			empty := in.Tokens != nil && len(in.Tokens[i]) == 0 || in.Tokens == nil && strings.TrimSpace(in.Inputs[i]) == ""
			if empty {
				f := field
				if n > 1 {
					f = fmt.Sprintf("%s[%d]", field, i)
				}
				ps = append(ps, errs.Problem{Field: f, Problem: "must not be empty"})
			}
		}
	}
	dimensions := in.Dimensions
	if dimensions != nil && *dimensions < 1 {
		ps = append(ps, errs.Problem{Field: "dimensions", Problem: "must be at least 1"})
	}
	if err := errs.Problems("invalid request", ps); err != nil {
		return nil, err
	}
	m, err := g.Model(ctx, model, true)
	if err != nil {
		return nil, err
	}
	if !m.Has(CapEmbeddings) {
		return nil, capabilityError(m, CapEmbeddings)
	}
	if in.Tokens != nil {
		in.Inputs = make([]string, len(in.Tokens))
		for i, ids := range in.Tokens {
			text, err := DecodeTokens(m.Name, ids)
			if err != nil {
				f := field
				if len(in.Tokens) > 1 {
					f = fmt.Sprintf("%s[%d]", field, i)
				}
				return nil, errs.Problems("invalid request", []errs.Problem{{Field: f, Problem: fmt.Sprintf("is not a token array of %s's encoding (%s): %v", m.ID, EncodingFor(m.Name), err)}})
			}
			in.Inputs[i] = text
		}
	}
	inputs := in.Inputs
	req := &Request{Model: m.ID, Prompt: strings.Join(inputs, "\n")}
	settle, err := g.admit(ctx, m, req)
	if err != nil {
		return nil, err
	}
	op := "embeddings"
	if field == "input" {
		op = "openai.embeddings"
	}
	c := &callInfo{op: op, requested: m.ID, start: time.Now()}
	cands := []*Model{m}
	for _, id := range m.Fallbacks {
		if f, err := g.Catalog.Lookup(id); err == nil && f.Has(CapEmbeddings) && allow(ctx, f) == nil {
			cands = append(cands, f)
		}
	}
	resp, cand, err := attempt(ctx, g, c, cands, func(cand *Model) (*EmbedResponse, error) {
		er := in
		if EncodingFor(cand.Name) != EncodingFor(m.Name) {
			er.Tokens = nil // a fallback with another encoding gets the decoded text
		}
		return cand.provider.Embed(ctx, cand, &er)
	})
	if err != nil {
		settle(nil, Usage{})
		return nil, err
	}
	if dimensions == nil && len(resp.Vectors) > 0 {
		cand.observeDimensions(len(resp.Vectors[0]))
	}
	res := &EmbedResult{Model: cand, Vectors: resp.Vectors, CreatedAt: g.now()}
	if resp.Usage != nil {
		res.Usage = Usage{PromptTokens: resp.Usage.PromptTokens}
	} else {
		n := 0
		for _, text := range inputs {
			n += CountTokens(cand.Name, text)
		}
		res.Usage = Usage{PromptTokens: n, Estimated: true}
	}
	g.account(ctx, c, cand, res.Usage)
	settle(cand, res.Usage)
	return res, nil
}

// FunctionCall is the function the model chose, with its arguments.
type FunctionCall struct {
	Name string
	// Arguments is the arguments object (numbers as json.Number); nil when
	// the model sent something that is not a JSON object.
	Arguments map[string]any
	// RawArguments is the arguments text as the model wrote it.
	RawArguments string
}

// FunctionResult is the outcome of /v1/function-calling.
type FunctionResult struct {
	*Result
	// Call is nil when the model called no function.
	Call *FunctionCall
	// Valid reports whether Call names a declared function and its
	// arguments conform to the declared parameters.
	Valid bool
	// Problems lists every way the call does not conform.
	Problems []errs.Problem
}

// CallFunction asks the model to choose among fns for the conversation in
// r and checks the call it makes against the declaration.
func (g *Gateway) CallFunction(ctx context.Context, r *Request, fns []FunctionDef) (*FunctionResult, error) {
	compiled, ps := compileFunctions(fns, "functions")
	if len(fns) == 0 {
		ps = append(ps, errs.Problem{Field: "functions", Problem: "must declare at least one function"})
	}
	if len(ps) > 0 {
		// Report function problems together with the rest of the request's.
		if _, err := g.prepare(ctx, OpFunctions, r); err != nil && errs.KindOf(err) == errs.Validation {
			ps = append(errs.ProblemsOf(err), ps...)
		} else if errs.KindOf(err) == errs.Forbidden {
			return nil, err // a model outside the policy comes first, as in prepare
		}
		return nil, errs.Problems("invalid request", ps)
	}
	r.Tools = make([]Tool, len(fns))
	for i, f := range fns {
		r.Tools[i] = f.Tool()
	}
	if r.ToolChoice == nil {
		r.ToolChoice = &ToolChoice{Mode: ToolChoiceAuto}
	}
	no := false
	r.ParallelToolCalls = &no
	res, err := g.Complete(ctx, OpFunctions, r)
	if err != nil {
		return nil, err
	}
	out := &FunctionResult{Result: res}
	if len(res.ToolCalls) == 0 {
		return out, nil
	}
	out.Call, out.Problems = (&Functions{compiled: compiled}).Check(res.ToolCalls[0])
	out.Valid = len(out.Problems) == 0
	return out, nil
}

// Functions are declared functions, compiled to check the calls a model
// makes against their declarations.
type Functions struct{ compiled map[string]*compiledFunction }

// CompileFunctions validates fns as /v1/function-calling does (names,
// uniqueness, parameters of type object whose required names exist), field
// naming them in problems ("functions"). It returns the compiled functions
// and every problem; fns may be empty.
func CompileFunctions(fns []FunctionDef, field string) (*Functions, []errs.Problem) {
	compiled, ps := compileFunctions(fns, field)
	return &Functions{compiled: compiled}, ps
}

// Has reports whether a function named name is declared.
func (f *Functions) Has(name string) bool {
	_, ok := f.compiled[name]
	return ok
}

// Check checks the call tc against the declarations: it returns the call
// with its arguments object (nil when the model sent something that is not
// a JSON object) and every way it does not conform (an undeclared function,
// arguments outside the parameters), with fields under "functionCall".
func (f *Functions) Check(tc ToolCall) (*FunctionCall, []errs.Problem) {
	call := &FunctionCall{Name: tc.Name, RawArguments: tc.Arguments}
	var ps []errs.Problem
	cf, declared := f.compiled[tc.Name]
	if !declared {
		ps = append(ps, errs.Problem{Field: "functionCall.name", Problem: fmt.Sprintf("the model called %q, which was not declared", tc.Name)})
		call.Arguments, _ = checkArguments(&compiledFunction{schema: &schema{}}, tc.Arguments)
		return call, ps
	}
	args, aps := checkArguments(cf, tc.Arguments)
	call.Arguments = args
	for _, p := range aps {
		p.Field = "functionCall." + p.Field
		ps = append(ps, p)
	}
	return call, ps
}
