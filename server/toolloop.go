package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ratelimit"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/tools"
)

// withConnectionHeader passes the Switchboard-Connection header of the
// operations with a tool loop to their handlers (connectionHeader).
func withConnectionHeader(f api.StrictHandlerFunc, operationID string) api.StrictHandlerFunc {
	if operationID != "Chat" && operationID != "CallFunction" {
		return f
	}
	return func(c echo.Context, request any) (any, error) {
		if v := c.Request().Header.Get(tools.ConnectionHeader); v != "" {
			r := c.Request()
			c.SetRequest(r.WithContext(context.WithValue(r.Context(), connectionHeaderKey{}, v)))
		}
		return f(c, request)
	}
}

type connectionHeaderKey struct{}

// connectionHeader is the Switchboard-Connection header of the request in
// ctx ("" when absent).
func connectionHeader(ctx context.Context) string {
	v, _ := ctx.Value(connectionHeaderKey{}).(string)
	return v
}

// loopFields are the tool-loop fields of /v1/chat and /v1/function-calling.
type loopFields struct {
	actions    *[]string
	toolset    *string
	execute    *bool
	maxSteps   *int
	connection string // the Switchboard-Connection header
}

// wanted reports whether the request asks for the tool loop.
func (f loopFields) wanted() bool {
	return f.actions != nil || f.toolset != nil || f.execute != nil || f.maxSteps != nil
}

// toolLoop validates the loop fields and resolves what the loop offers
// and runs for the caller in ctx: the Loop (with model calls of op, later
// ones of next), its input (r, the caller's functions in r.Tools) and the
// offered actions. Errors: 422 for execute or maxSteps without actions, a
// maxSteps outside 1..20 and those of tools.Offered; 403 from
// tools.Offered and tools.Connection.
func (s *Server) toolLoop(ctx context.Context, f loopFields, r *llm.Request, op, next llm.Op) (*tools.Loop, tools.LoopInput, error) {
	o := tools.Offer{Toolset: deref(f.toolset)}
	if f.actions != nil {
		o.Actions = *f.actions
	}
	var ps []errs.Problem
	if o.Empty() {
		ps = append(ps, errs.Problem{Field: "actions", Problem: "execute and maxSteps need actions or toolset: list the actions to offer (connector.action, connector.*) or name a toolset"})
	}
	maxSteps := tools.DefaultMaxSteps
	if f.maxSteps != nil {
		maxSteps = *f.maxSteps
		if maxSteps < 1 || maxSteps > tools.MaxMaxSteps {
			ps = append(ps, errs.Problem{Field: "maxSteps", Problem: fmt.Sprintf("must be between 1 and %d, got %d", tools.MaxMaxSteps, maxSteps)})
		}
	}
	if err := errs.Problems("invalid request", ps); err != nil {
		return nil, tools.LoopInput{}, err
	}
	p := auth.FromContext(ctx)
	offered, sel, err := tools.Offered(ctx, s.catalog, s.toolsets, p, o)
	if err != nil {
		return nil, tools.LoopInput{}, err
	}
	names := make(map[string]bool, len(offered))
	for _, t := range offered {
		names[t.Name] = true
	}
	for i, fn := range r.Tools {
		if names[fn.Name] {
			ps = append(ps, errs.Problem{Field: fmt.Sprintf("functions[%d].name", i), Problem: fmt.Sprintf("%q is the name of an offered action's tool; rename the function", fn.Name)})
		}
	}
	if n := len(offered) + len(r.Tools); n > tools.MaxOffered {
		ps = append(ps, errs.Problem{Field: "actions", Problem: fmt.Sprintf("offers %d actions besides %d functions; at most %d in all", len(offered), len(r.Tools), tools.MaxOffered)})
	}
	if err := errs.Problems("invalid request", ps); err != nil {
		return nil, tools.LoopInput{}, err
	}
	conn, err := tools.Connection(p, f.connection)
	if err != nil {
		return nil, tools.LoopInput{}, err
	}
	loop := &tools.Loop{
		Model: gatewayModel{g: s.llm, first: op, next: next},
		Executor: tools.CatalogExecutor{Catalog: s.catalog, Runner: s.invoker, Principal: p, Selection: sel,
			Admit: func(ctx context.Context) error { return s.admitRun(ctx, p) }},
	}
	in := tools.LoopInput{Request: r, Actions: offered, Execute: f.execute != nil && *f.execute, MaxSteps: maxSteps,
		Connection: conn, RequestID: requestid.From(ctx)}
	return loop, in, nil
}

// admitRun counts an action run of the tool loop as one request of p's
// requests-per-minute limit, as POST /v1/integrations/{connector}/run is
// counted: a 429 rate_limited (reported as ratelimit.exceeded) when none
// is left.
func (s *Server) admitRun(ctx context.Context, p *auth.Principal) error {
	res, err := s.limiter.AllowRequest(ctx, p, ratelimit.DataPlane)
	if err != nil {
		return err
	}
	return s.refusal(p, res)
}

// gatewayModel makes a loop's model calls through the gateway (validation,
// admission, fallbacks, usage): the first as op, the later ones, whose
// conversation carries tool turns, as next.
type gatewayModel struct {
	g           *llm.Gateway
	first, next llm.Op
}

func (m gatewayModel) Call(ctx context.Context, turn int, r *llm.Request) (*llm.Result, error) {
	return m.g.Complete(ctx, m.op(turn), r)
}

// op is the operation of the loop's model call turn (from 1).
func (m gatewayModel) op(turn int) llm.Op {
	if turn > 1 {
		return m.next
	}
	return m.first
}

// loopSteps is the wire form of a loop's steps.
func loopSteps(steps []tools.Step) *[]api.ToolLoopStep {
	out := make([]api.ToolLoopStep, len(steps))
	for i, st := range steps {
		out[i] = loopStep(st)
	}
	return &out
}

func loopStep(st tools.Step) api.ToolLoopStep {
	out := api.ToolLoopStep{Turn: st.Turn, CallId: ptrIf(st.CallID), Action: st.Action, Tool: st.Tool, Params: st.Params,
		Status: intPtrIf(st.Status), DurationMs: st.DurationMs}
	if st.Error != nil {
		out.Error = &api.ToolLoopStepError{Code: st.Error.Code, Message: st.Error.Message}
	}
	return out
}

// loopChat is the ChatCompletion of a loop.
func loopChat(id string, res *tools.LoopResult, execute bool) api.ChatCompletion {
	cc := chatCompletion(id, res.Final)
	cc.PromptTokens, cc.CompletionTokens, cc.TotalTokens = res.Usage.PromptTokens, res.Usage.CompletionTokens, res.Usage.Total()
	if execute {
		cc.Steps = loopSteps(res.Steps)
	}
	reason, calls := api.ChatCompletionStopReason(res.StopReason), res.ModelCalls
	cc.StopReason, cc.ModelCalls = &reason, &calls
	if res.Call != nil {
		call, _ := (&llm.Functions{}).Check(*res.Call)
		args := call.Arguments
		if args == nil {
			args = map[string]any{}
		}
		cc.FunctionCall = &api.FunctionCall{Name: call.Name, Arguments: args}
	}
	return cc
}

// loopFunctionCall is the FunctionCallResult of a loop; fns are the
// caller's functions, checked with the offered actions.
func loopFunctionCall(res *tools.LoopResult, fns []llm.FunctionDef, actions []tools.Tool, execute bool) api.FunctionCallResult {
	out := functionCallResult(&llm.FunctionResult{Result: res.Final})
	out.PromptTokens, out.CompletionTokens, out.TotalTokens = res.Usage.PromptTokens, res.Usage.CompletionTokens, res.Usage.Total()
	if execute {
		out.Steps = loopSteps(res.Steps)
	}
	reason, calls := api.FunctionCallResultStopReason(res.StopReason), res.ModelCalls
	out.StopReason, out.ModelCalls = &reason, &calls
	if res.Call == nil {
		return out
	}
	defs := append([]llm.FunctionDef(nil), fns...)
	for _, t := range actions {
		params, _ := json.Marshal(t.InputSchema)
		defs = append(defs, llm.FunctionDef{Name: t.Name, Description: t.Description, Parameters: params})
	}
	checker, _ := llm.CompileFunctions(defs, "functions")
	fr := &llm.FunctionResult{Result: res.Final}
	fr.Call, fr.Problems = checker.Check(*res.Call)
	fr.Valid = len(fr.Problems) == 0
	full := functionCallResult(fr)
	out.FunctionCall, out.ArgumentsValid, out.ArgumentsProblems = full.FunctionCall, full.ArgumentsValid, full.ArgumentsProblems
	if res.Final.Text == "" {
		out.Message = nil
	}
	return out
}

// streamModel makes a streamed loop's model calls: each call's text is
// sent as `delta` events as it comes; the event stream starts (200) once
// the first call's upstream accepted it, so that an error before then is
// an ordinary error response.
type streamModel struct {
	gatewayModel
	w  http.ResponseWriter
	sw *sseWriter // nil until the first call's upstream accepted it
}

// send writes one event and sends it; false when the caller went away.
func (m *streamModel) send(name string, v any) bool {
	return m.sw.event(name, v) && m.sw.flush()
}

func (m *streamModel) Call(ctx context.Context, turn int, r *llm.Request) (*llm.Result, error) {
	st, err := m.g.Stream(ctx, m.op(turn), r)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if m.sw == nil {
		m.sw = startSSE(m.w)
	}
	if err := eachChunk(m.sw, st, nativeDeltas(m.sw)); err != nil {
		return nil, err
	}
	return st.Result(), nil
}

// loopStream writes a streamed chat with the tool loop: `delta` events
// for the text of every model call, a `step` event (ToolLoopStep) as each
// action run completes, then `done` with the ChatCompletion, or `error`.
type loopStream struct {
	s     *Server
	ctx   context.Context
	loop  *tools.Loop
	in    tools.LoopInput
	model *streamModel
	id    string
}

func (ls *loopStream) VisitChatResponse(w http.ResponseWriter) error {
	m := ls.model
	m.w = w
	ls.loop.Model = m
	ls.in.OnStep = func(st tools.Step) { m.send("step", loopStep(st)) }
	res, err := ls.loop.Run(ls.ctx, ls.in)
	switch {
	case err != nil && m.sw == nil:
		return err // nothing sent yet: an ordinary error response
	case err == errClientGone:
		return nil
	case err != nil:
		ls.s.streamFailed(ls.ctx, err)
		m.sw.nativeError(ls.ctx, classify(err))
		return nil
	}
	m.sw.event("done", loopChat(ls.id, res, ls.in.Execute)) // leaves with the end of the body
	return nil
}

// chatLoop answers /v1/chat with actions: the tool loop, streamed or not.
func (h *handlers) chatLoop(ctx context.Context, f loopFields, r *llm.Request, id string, stream bool) (api.ChatResponseObject, error) {
	loop, in, err := h.s.toolLoop(ctx, f, r, llm.OpChat, llm.OpChatLoop)
	if err != nil {
		return nil, err
	}
	if stream {
		return &loopStream{s: h.s, ctx: ctx, loop: loop, in: in, model: &streamModel{gatewayModel: loop.Model.(gatewayModel)}, id: id}, nil
	}
	res, err := loop.Run(ctx, in)
	if err != nil {
		return nil, err
	}
	cc := loopChat(id, res, in.Execute)
	return &jsonOK{v: &cc}, nil
}

// functionLoop answers /v1/function-calling with actions: fns are the
// caller's functions (validated here; none is needed when actions are
// offered).
func (h *handlers) functionLoop(ctx context.Context, f loopFields, r *llm.Request, fns []llm.FunctionDef) (api.CallFunctionResponseObject, error) {
	if _, ps := llm.CompileFunctions(fns, "functions"); len(ps) > 0 {
		return nil, errs.Problems("invalid request", ps)
	}
	r.Tools = make([]llm.Tool, len(fns))
	for i, fn := range fns {
		r.Tools[i] = fn.Tool()
	}
	loop, in, err := h.s.toolLoop(ctx, f, r, llm.OpFunctions, llm.OpFunctionsLoop)
	if err != nil {
		return nil, err
	}
	res, err := loop.Run(ctx, in)
	if err != nil {
		return nil, err
	}
	out := loopFunctionCall(res, fns, in.Actions, in.Execute)
	return &jsonOK{v: &out}, nil
}
