package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm"
)

// Bounds of a loop's model calls.
const (
	// DefaultMaxSteps is the number of model calls a loop makes at most
	// when the caller sets none.
	DefaultMaxSteps = 5
	// MaxMaxSteps is the largest maxSteps a caller may set.
	MaxMaxSteps = 20
)

// Why a loop stopped.
const (
	// StopAnswer: the model answered without calling a function.
	StopAnswer = "answer"
	// StopFunctionCall: the model called a function the loop does not run
	// (a caller's function, or an action when the loop does not execute).
	StopFunctionCall = "function_call"
	// StopMaxSteps: the last allowed model call still called actions.
	StopMaxSteps = "max_steps"
)

// Model makes one model call of a loop.
type Model interface {
	// Call sends req (the conversation so far, with the tools offered) to
	// the model; turn counts the loop's model calls from 1.
	Call(ctx context.Context, turn int, req *llm.Request) (*llm.Result, error)
}

// Executor runs an action the model called.
type Executor interface {
	// Execute runs call of the tool t. An error wrapped by Abort ends the
	// loop whatever its kind; see Loop for the others.
	Execute(ctx context.Context, t Tool, call Call) (connectors.RunResult, error)
}

// abortError is an Executor error that ends the loop.
type abortError struct{ err error }

func (e abortError) Error() string { return e.err.Error() }
func (e abortError) Unwrap() error { return e.err }

// Abort marks err (a refused admission) as ending the loop.
func Abort(err error) error { return abortError{err} }

// Step is one action run of a loop.
type Step struct {
	// Turn is the model call (from 1) that asked for the run.
	Turn int
	// CallID is the model's id of the tool call.
	CallID string
	// Tool is the tool name the model called.
	Tool string
	// Action is "connector.action"; empty when the name is no offered action.
	Action string
	// Params are the arguments the model passed (empty when they were not
	// a JSON object).
	Params map[string]any
	// Status is the upstream's HTTP status; 0 when none answered.
	Status int
	// DurationMs is how long the run took.
	DurationMs int64
	// Error is why the run failed; nil on success.
	Error *StepError
}

// StepError is why an action run failed, as the model reads it.
type StepError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// LoopInput is one run of a loop.
type LoopInput struct {
	// Request is the model request: model, knobs, the caller's
	// conversation and the caller's own functions (Tools), which the loop
	// never runs. Its Tools and ToolChoice are replaced per call.
	Request *llm.Request
	// Actions are the action tools offered to the model besides the
	// caller's functions; their names must not clash with them.
	Actions []Tool
	// Execute runs the actions the model calls; without it the loop makes
	// one model call and returns the call.
	Execute bool
	// MaxSteps bounds the model calls (DefaultMaxSteps when 0).
	MaxSteps int
	// Connection and RequestID are passed to every Execute.
	Connection, RequestID string
	// OnStep, when set, is called with each step as soon as it and every
	// earlier step of its turn completed, in call order, on the loop's
	// goroutine.
	OnStep func(Step)
}

// LoopResult is what a loop returns.
type LoopResult struct {
	// Final is the last model call's result.
	Final *llm.Result
	// Steps are the action runs, in order.
	Steps []Step
	// Usage sums every model call's usage.
	Usage llm.Usage
	// ModelCalls counts the model calls.
	ModelCalls int
	// StopReason is StopAnswer, StopFunctionCall or StopMaxSteps.
	StopReason string
	// Call is the call of Final's turn the loop did not run (a caller's
	// function, or an action when not executing or at max_steps); nil
	// with StopAnswer.
	Call *llm.ToolCall
}

// Loop offers actions to a model as tools and, when asked, runs the ones
// the model calls and calls the model again with their results.
type Loop struct {
	// Model makes the model calls (each admitted and accounted by the
	// gateway).
	Model Model
	// Executor runs the actions.
	Executor Executor
}

// Run runs the loop: a model call; when it calls offered actions and
// in.Execute is set, their runs (concurrently, results in call order),
// whose results are fed back as tool turns; then the next model call,
// until the model answers without calling a function, calls a function
// that is no action (the caller's, returned as Call, the other calls of
// that turn not run), or in.MaxSteps model calls were made (the actions
// of the last are not run). A call of a name that is neither an offered
// action nor a caller's function is answered with a not_found tool error.
//
// A failed run (an upstream error, invalid parameters, a refused
// destination, a failed transformation, ...) becomes the model's tool
// result {"error": {"code", "message"}} and the step's Error. Run returns
// an error, and no result, when a model call fails, when an action run is
// refused by an admission (Abort), by authentication or policy
// (unauthenticated, forbidden), a rate limit or a budget, or when ctx
// ends.
func (l *Loop) Run(ctx context.Context, in LoopInput) (*LoopResult, error) {
	maxSteps := in.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	callerFns := make(map[string]bool, len(in.Request.Tools))
	tools := make([]llm.Tool, 0, len(in.Request.Tools)+len(in.Actions))
	for _, t := range in.Request.Tools {
		callerFns[t.Name] = true
		tools = append(tools, t)
	}
	actions := make(map[string]Tool, len(in.Actions))
	for _, t := range in.Actions {
		actions[t.Name] = t
		params, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "encoding the input schema of "+t.Ref())
		}
		tools = append(tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: params})
	}
	msgs := append([]llm.Message(nil), in.Request.Messages...)
	out := &LoopResult{}
	for turn := 1; ; turn++ {
		req := *in.Request
		req.Messages, req.Tools = msgs, tools
		if len(tools) > 0 {
			req.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceAuto}
			if !in.Execute {
				// One call, returned as functionCall.
				no := false
				req.ParallelToolCalls = &no
			}
		}
		res, err := l.Model.Call(ctx, turn, &req)
		if err != nil {
			return nil, err
		}
		out.Final, out.ModelCalls = res, turn
		out.Usage = addUsage(out.Usage, res.Usage)
		for i := range res.ToolCalls {
			if res.ToolCalls[i].ID == "" {
				res.ToolCalls[i].ID = llm.NewID("call_")
			}
		}
		if len(res.ToolCalls) == 0 {
			out.StopReason = StopAnswer
			return out, nil
		}
		if !in.Execute {
			out.StopReason, out.Call = StopFunctionCall, &res.ToolCalls[0]
			return out, nil
		}
		for i, tc := range res.ToolCalls {
			if _, isAction := actions[tc.Name]; !isAction && callerFns[tc.Name] {
				out.StopReason, out.Call = StopFunctionCall, &res.ToolCalls[i]
				return out, nil
			}
		}
		if turn >= maxSteps {
			out.StopReason, out.Call = StopMaxSteps, &res.ToolCalls[0]
			return out, nil
		}
		steps, results, err := l.runTurn(ctx, in, turn, actions, res.ToolCalls)
		out.Steps = append(out.Steps, steps...)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: res.Text, ToolCalls: res.ToolCalls})
		for i, tc := range res.ToolCalls {
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: results[i]})
		}
	}
}

// ran is one finished call of a turn.
type ran struct {
	i      int
	step   Step
	result string
	err    error // ends the loop
}

// runTurn runs the calls of one turn concurrently and returns their steps
// and tool results in call order, or the first error (in call order) that
// ends the loop, once every call finished.
func (l *Loop) runTurn(ctx context.Context, in LoopInput, turn int, actions map[string]Tool, calls []llm.ToolCall) ([]Step, []string, error) {
	done := make(chan ran, len(calls))
	for i, tc := range calls {
		go func() { done <- l.runCall(ctx, in, turn, actions, i, tc) }()
	}
	steps := make([]Step, len(calls))
	results := make([]string, len(calls))
	errList := make([]error, len(calls))
	finished := make([]bool, len(calls))
	next := 0 // the first step not yet reported
	for range calls {
		r := <-done
		steps[r.i], results[r.i], errList[r.i], finished[r.i] = r.step, r.result, r.err, true
		for ; next < len(calls) && finished[next]; next++ {
			if in.OnStep != nil && errList[next] == nil {
				in.OnStep(steps[next])
			}
		}
	}
	for _, err := range errList {
		if err != nil {
			return steps, results, err
		}
	}
	return steps, results, nil
}

// runCall runs one call and returns its step and the tool result the model
// reads.
func (l *Loop) runCall(ctx context.Context, in LoopInput, turn int, actions map[string]Tool, i int, tc llm.ToolCall) ran {
	r := ran{i: i, step: Step{Turn: turn, CallID: tc.ID, Tool: tc.Name, Params: map[string]any{}}}
	fail := func(code, format string, args ...any) ran {
		r.step.Error = &StepError{Code: code, Message: fmt.Sprintf(format, args...)}
		r.result = errorResult(r.step.Error, nil)
		return r
	}
	t, ok := actions[tc.Name]
	if !ok {
		return fail(string(errs.NotFound), "no action is offered as %q; call one of the functions offered", tc.Name)
	}
	r.step.Action = t.Ref()
	params, err := decodeArguments(tc.Arguments)
	if err != nil {
		return fail(string(errs.Validation), "the arguments of %s are not a JSON object: %v", tc.Name, err)
	}
	r.step.Params = params
	start := time.Now()
	res, err := l.Executor.Execute(ctx, t, Call{Name: t.Name, Args: params, Connection: in.Connection, RequestID: in.RequestID})
	r.step.Status, r.step.DurationMs = res.Status, res.DurationMs
	if r.step.DurationMs == 0 {
		r.step.DurationMs = time.Since(start).Milliseconds()
	}
	if err != nil {
		if ends(ctx, err) {
			r.err = err
		}
		se, details := failure(err)
		if s, ok := details["status"].(int); ok && r.step.Status == 0 {
			r.step.Status = s
		}
		r.step.Error = &se
		r.result = errorResult(r.step.Error, details)
		return r
	}
	result := bytes.TrimSpace(res.Result)
	if len(result) == 0 {
		result = []byte("null")
	}
	r.result = string(result)
	return r
}

// ends reports whether an Executor error ends the loop rather than being
// the model's tool result.
func ends(ctx context.Context, err error) bool {
	var a abortError
	if errors.As(err, &a) || ctx.Err() != nil {
		return true
	}
	switch errs.KindOf(err) {
	case errs.Unauthenticated, errs.Forbidden, errs.RateLimited, errs.BudgetExceeded:
		return true
	}
	return false
}

// failure is err as a failed run: its code, its message as the API would
// send it (never its cause) and its details.
func failure(err error) (StepError, map[string]any) {
	var e *errs.Error
	if errors.As(err, &e) {
		return StepError{Code: string(e.Kind), Message: e.Message}, e.Details
	}
	return StepError{Code: string(errs.KindOf(err)), Message: "internal error"}, nil
}

// ErrorResult is a run's error as the tool result a model reads (MCP's
// tool errors too): {"error": {"code", "message", "details"}}.
func ErrorResult(err error) string {
	se, details := failure(err)
	return errorResult(&se, details)
}

// errorResult is the tool result of a failed run: {"error": {"code",
// "message", "details"}}, details (the upstream's status and the start of
// its body, the invalid parameters) when the error has some.
func errorResult(e *StepError, details map[string]any) string {
	b, err := json.Marshal(map[string]any{"error": toolError{StepError: *e, Details: details}})
	if err != nil {
		b, _ = json.Marshal(map[string]any{"error": e})
	}
	return string(b)
}

// toolError is the error object a model reads.
type toolError struct {
	StepError
	Details map[string]any `json:"details,omitempty"`
}

// decodeArguments parses a tool call's arguments text (empty is {}).
func decodeArguments(s string) (map[string]any, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return map[string]any{}, nil
	}
	// Numbers decode as float64, as the parameters of POST
	// /v1/integrations/{connector}/run do.
	dec := json.NewDecoder(strings.NewReader(s))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the object")
	}
	obj, ok := v.(map[string]any)
	if !ok || obj == nil {
		return nil, errors.New("not an object")
	}
	return obj, nil
}

// addUsage sums two calls' usage.
func addUsage(a, b llm.Usage) llm.Usage {
	return llm.Usage{
		PromptTokens:       a.PromptTokens + b.PromptTokens,
		CompletionTokens:   a.CompletionTokens + b.CompletionTokens,
		CachedPromptTokens: a.CachedPromptTokens + b.CachedPromptTokens,
		Estimated:          a.Estimated || b.Estimated,
	}
}
