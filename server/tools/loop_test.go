package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm"
)

// scriptedModel answers each model call with the next of its turns and
// keeps the requests it received.
type scriptedModel struct {
	turns []*llm.Result
	mu    sync.Mutex
	reqs  []llm.Request
}

func (m *scriptedModel) Call(_ context.Context, turn int, req *llm.Request) (*llm.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, *req)
	if turn > len(m.turns) {
		return nil, fmt.Errorf("unexpected model call %d", turn)
	}
	res := *m.turns[turn-1]
	res.ToolCalls = append([]llm.ToolCall(nil), res.ToolCalls...)
	return &res, nil
}

// fakeExecutor answers each tool with a result, or an error, after a delay.
type fakeExecutor struct {
	results map[string]string
	errors  map[string]error
	delay   map[string]time.Duration
	running atomic.Int32
	most    atomic.Int32 // the most runs at once
	calls   atomic.Int32
	conns   sync.Map // tool name -> connection
}

func (e *fakeExecutor) Execute(ctx context.Context, t Tool, call Call) (connectors.RunResult, error) {
	e.calls.Add(1)
	n := e.running.Add(1)
	defer e.running.Add(-1)
	for {
		m := e.most.Load()
		if n <= m || e.most.CompareAndSwap(m, n) {
			break
		}
	}
	e.conns.Store(t.Name, call.Connection)
	select {
	case <-time.After(e.delay[t.Name]):
	case <-ctx.Done():
		return connectors.RunResult{}, ctx.Err()
	}
	if err := e.errors[t.Name]; err != nil {
		return connectors.RunResult{DurationMs: 3}, err
	}
	return connectors.RunResult{Result: json.RawMessage(e.results[t.Name]), Status: 200, DurationMs: 7}, nil
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: args}
}

func turn(text string, usage llm.Usage, calls ...llm.ToolCall) *llm.Result {
	return &llm.Result{Text: text, ToolCalls: calls, Usage: usage}
}

var (
	forecast = Tool{Name: "weather-forecast", Connector: "weather", Action: "forecast", Description: "Forecast for a city",
		InputSchema: InputSchema(map[string]connectors.Parameter{"city": {Type: "string", Required: true}})}
	lookup = Tool{Name: "crm-lookup", Connector: "crm", Action: "lookup", Description: "Find a contact",
		InputSchema: InputSchema(map[string]connectors.Parameter{"email": {Type: "string"}})}
	u10 = llm.Usage{PromptTokens: 10, CompletionTokens: 3}
)

func TestLoop_Run(t *testing.T) {
	tests := []struct {
		name       string
		turns      []*llm.Result
		execute    bool
		maxSteps   int
		fns        []llm.Tool
		errors     map[string]error
		wantStop   string
		wantCalls  int // model calls
		wantRuns   int32
		wantSteps  []string // "action status error-code"
		wantCall   string   // the returned call's name
		wantResult map[int]string
	}{
		{
			name: "two actions then an answer",
			turns: []*llm.Result{
				turn("", u10, call("c1", "weather-forecast", `{"city":"Paris"}`), call("c2", "crm-lookup", `{"email":"a@b.c"}`)),
				turn("Sunny; Ann is your contact.", llm.Usage{PromptTokens: 40, CompletionTokens: 8}),
			},
			execute: true, wantStop: StopAnswer, wantCalls: 2, wantRuns: 2,
			wantSteps:  []string{"weather.forecast 200 ", "crm.lookup 200 "},
			wantResult: map[int]string{0: `{"temp":21}`, 1: `{"name":"Ann"}`},
		},
		{
			name: "max steps reached: the last turn's actions are not run",
			turns: []*llm.Result{
				turn("", u10, call("c1", "weather-forecast", `{"city":"Paris"}`)),
				turn("", u10, call("c2", "weather-forecast", `{"city":"Rome"}`)),
			},
			execute: true, maxSteps: 2, wantStop: StopMaxSteps, wantCalls: 2, wantRuns: 1,
			wantSteps: []string{"weather.forecast 200 "}, wantCall: "weather-forecast",
		},
		{
			name: "an upstream error is fed back to the model",
			turns: []*llm.Result{
				turn("", u10, call("c1", "weather-forecast", `{"city":"Atlantis"}`)),
				turn("No forecast for Atlantis.", u10),
			},
			errors:  map[string]error{"weather-forecast": errs.E(errs.Upstream, "weather: the upstream answered 404 Not Found").WithDetails(map[string]any{"status": 404, "body": "no such city"})},
			execute: true, wantStop: StopAnswer, wantCalls: 2, wantRuns: 1,
			wantSteps:  []string{"weather.forecast 404 upstream_error"},
			wantResult: map[int]string{0: `{"error":{"code":"upstream_error","message":"weather: the upstream answered 404 Not Found","details":{"body":"no such city","status":404}}}`},
		},
		{
			name: "arguments that are no object and an unknown tool are tool errors",
			turns: []*llm.Result{
				turn("", u10, call("c1", "weather-forecast", `"Paris"`), call("c2", "weather-history", `{}`)),
				turn("Sorry.", u10),
			},
			execute: true, wantStop: StopAnswer, wantCalls: 2, wantRuns: 0,
			wantSteps: []string{"weather.forecast 0 validation_failed", " 0 not_found"},
		},
		{
			name: "a caller's function stops the loop, its turn's actions not run",
			turns: []*llm.Result{
				turn("", u10, call("c1", "weather-forecast", `{"city":"Paris"}`)),
				turn("", u10, call("c2", "weather-forecast", `{"city":"Rome"}`), call("c3", "book_trip", `{"to":"Rome"}`)),
			},
			fns:     []llm.Tool{{Name: "book_trip"}},
			execute: true, wantStop: StopFunctionCall, wantCalls: 2, wantRuns: 1,
			wantSteps: []string{"weather.forecast 200 "}, wantCall: "book_trip",
		},
		{
			name:    "without execute the action call is returned",
			turns:   []*llm.Result{turn("", u10, call("c1", "weather-forecast", `{"city":"Paris"}`))},
			execute: false, wantStop: StopFunctionCall, wantCalls: 1, wantRuns: 0, wantCall: "weather-forecast",
		},
		{
			name:    "an answer at once",
			turns:   []*llm.Result{turn("Hello", u10)},
			execute: true, wantStop: StopAnswer, wantCalls: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &scriptedModel{turns: tc.turns}
			ex := &fakeExecutor{results: map[string]string{"weather-forecast": `{"temp":21}`, "crm-lookup": `{"name":"Ann"}`}, errors: tc.errors}
			var streamed []Step
			l := &Loop{Model: m, Executor: ex}
			res, err := l.Run(context.Background(), LoopInput{
				Request: &llm.Request{Model: "openai/gpt-4o-mini", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Weather in Paris?"}}, Tools: tc.fns},
				Actions: []Tool{lookup, forecast}, Execute: tc.execute, MaxSteps: tc.maxSteps, Connection: "acme", RequestID: "req_1",
				OnStep: func(s Step) { streamed = append(streamed, s) },
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != tc.wantStop || res.ModelCalls != tc.wantCalls || len(m.reqs) != tc.wantCalls {
				t.Errorf("stop %q after %d model calls (%d made), want %q after %d", res.StopReason, res.ModelCalls, len(m.reqs), tc.wantStop, tc.wantCalls)
			}
			if got := ex.calls.Load(); got != tc.wantRuns {
				t.Errorf("%d runs, want %d", got, tc.wantRuns)
			}
			var steps []string
			for _, s := range res.Steps {
				code := ""
				if s.Error != nil {
					code = s.Error.Code
				}
				steps = append(steps, fmt.Sprintf("%s %d %s", s.Action, s.Status, code))
				if s.Turn < 1 || s.CallID == "" || s.Params == nil {
					t.Errorf("step %+v", s)
				}
			}
			if strings.Join(steps, "|") != strings.Join(tc.wantSteps, "|") {
				t.Errorf("steps %q, want %q", steps, tc.wantSteps)
			}
			if len(streamed) != len(res.Steps) {
				t.Errorf("OnStep saw %d steps of %d", len(streamed), len(res.Steps))
			}
			switch {
			case tc.wantCall == "" && res.Call != nil:
				t.Errorf("call %+v returned", res.Call)
			case tc.wantCall != "" && (res.Call == nil || res.Call.Name != tc.wantCall):
				t.Errorf("call %+v, want %s", res.Call, tc.wantCall)
			}
			// Usage is the sum of every model call's.
			want := llm.Usage{}
			for _, r := range tc.turns[:tc.wantCalls] {
				want.PromptTokens += r.Usage.PromptTokens
				want.CompletionTokens += r.Usage.CompletionTokens
			}
			if res.Usage != want {
				t.Errorf("usage %+v, want %+v", res.Usage, want)
			}
			// The first call offers the caller's functions, then the actions.
			if got := len(m.reqs[0].Tools); got != len(tc.fns)+2 {
				t.Errorf("%d tools offered", got)
			}
			if p := m.reqs[0].ParallelToolCalls; tc.execute == (p != nil) {
				t.Errorf("parallelToolCalls %v with execute %v", p, tc.execute)
			}
			// Each later call carries the assistant's calls and one tool
			// turn per call, in order, with its result.
			if tc.wantCalls > 1 && len(tc.wantSteps) > 0 {
				msgs := m.reqs[1].Messages
				calls := tc.turns[0].ToolCalls
				if len(msgs) != 2+len(calls) || msgs[1].Role != llm.RoleAssistant || len(msgs[1].ToolCalls) != len(calls) {
					t.Fatalf("second call's messages %+v", msgs)
				}
				for i, c := range calls {
					tm := msgs[2+i]
					if tm.Role != llm.RoleTool || tm.ToolCallID != c.ID {
						t.Errorf("tool turn %d %+v", i, tm)
					}
					if want, ok := tc.wantResult[i]; ok && tm.Content != want {
						t.Errorf("tool turn %d content %s, want %s", i, tm.Content, want)
					}
				}
			}
			ex.conns.Range(func(k, v any) bool {
				if v != "acme" {
					t.Errorf("%v ran on connection %v", k, v)
				}
				return true
			})
		})
	}
}

func TestLoop_RunsTheCallsOfOneTurnConcurrentlyInOrder(t *testing.T) {
	m := &scriptedModel{turns: []*llm.Result{
		turn("", u10, call("c1", "weather-forecast", `{"city":"Paris"}`), call("c2", "crm-lookup", `{}`)),
		turn("done", u10),
	}}
	// The first call is the slower: both must run at once, and the steps
	// still come in call order.
	ex := &fakeExecutor{results: map[string]string{"weather-forecast": `1`, "crm-lookup": `2`},
		delay: map[string]time.Duration{"weather-forecast": 100 * time.Millisecond, "crm-lookup": 10 * time.Millisecond}}
	var streamed []string
	start := time.Now()
	res, err := (&Loop{Model: m, Executor: ex}).Run(context.Background(), LoopInput{
		Request: &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}},
		Actions: []Tool{forecast, lookup}, Execute: true,
		OnStep: func(s Step) { streamed = append(streamed, s.Tool) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if ex.most.Load() != 2 {
		t.Errorf("at most %d runs at once, want 2", ex.most.Load())
	}
	if d := time.Since(start); d > 180*time.Millisecond {
		t.Errorf("took %v: the runs did not overlap", d)
	}
	if strings.Join(streamed, ",") != "weather-forecast,crm-lookup" || res.Steps[0].Tool != "weather-forecast" {
		t.Errorf("steps in order %v / %+v", streamed, res.Steps)
	}
	if got := m.reqs[1].Messages[2].Content + m.reqs[1].Messages[3].Content; got != "12" {
		t.Errorf("results fed back %q", got)
	}
}

func TestLoop_RefusalsEndTheLoop(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want errs.Kind
	}{
		{"rate limit", errs.E(errs.RateLimited, "rate limit exceeded"), errs.RateLimited},
		{"budget", errs.E(errs.BudgetExceeded, "budget used up"), errs.BudgetExceeded},
		{"policy", errs.E(errs.Forbidden, "may not run"), errs.Forbidden},
		{"admission of any kind", Abort(errs.E(errs.Unavailable, "redis is down")), errs.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &scriptedModel{turns: []*llm.Result{turn("", u10, call("c1", "weather-forecast", `{}`)), turn("never", u10)}}
			ex := &fakeExecutor{errors: map[string]error{"weather-forecast": tc.err}}
			_, err := (&Loop{Model: m, Executor: ex}).Run(context.Background(), LoopInput{
				Request: &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}},
				Actions: []Tool{forecast}, Execute: true,
			})
			if errs.KindOf(err) != tc.want {
				t.Fatalf("error %v, want %s", err, tc.want)
			}
			if len(m.reqs) != 1 {
				t.Errorf("%d model calls after the refusal", len(m.reqs))
			}
		})
	}
}

func TestLoop_ModelErrorEndsTheLoop(t *testing.T) {
	m := &scriptedModel{} // no turn: the first call fails
	_, err := (&Loop{Model: m, Executor: &fakeExecutor{}}).Run(context.Background(), LoopInput{
		Request: &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}, Actions: []Tool{forecast}, Execute: true,
	})
	if err == nil {
		t.Fatal("no error")
	}
}

func TestLoop_AssignsMissingCallIDs(t *testing.T) {
	// Streams from Gemini carry no call ids; tool turns need them.
	m := &scriptedModel{turns: []*llm.Result{turn("", u10, call("", "weather-forecast", `{}`)), turn("ok", u10)}}
	res, err := (&Loop{Model: m, Executor: &fakeExecutor{results: map[string]string{"weather-forecast": "{}"}}}).Run(context.Background(), LoopInput{
		Request: &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}, Actions: []Tool{forecast}, Execute: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Steps[0].CallID
	if !strings.HasPrefix(id, "call_") || m.reqs[1].Messages[1].ToolCalls[0].ID != id || m.reqs[1].Messages[2].ToolCallID != id {
		t.Errorf("call id %q not carried through: %+v", id, m.reqs[1].Messages)
	}
}
