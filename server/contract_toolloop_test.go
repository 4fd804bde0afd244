package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/tools"
)

// loopLLM is an upstream speaking OpenAI's chat completions wire, scripted
// by model:
//
//   - "agent": with no tool turn yet, calls weather-forecast (the city is
//     the last user message) and crm-lookup; then answers.
//   - "booker": calls weather-forecast, then the caller's book_trip.
//   - "looper": calls weather-forecast on every turn.
//
// Every call reports usage: 50+10 tokens for a call, 80+12 for an answer.
type loopLLM struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []loopLLMRequest
}

// loopLLMRequest is the part of a chat completions request the tests read.
type loopLLMRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ParallelToolCalls *bool `json:"parallel_tool_calls"`
}

func (r loopLLMRequest) toolNames() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

func newLoopLLM(t *testing.T) *loopLLM {
	f := &loopLLM{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req loopLLMRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		toolTurns, city := 0, ""
		for _, m := range req.Messages {
			if m.Role == "tool" {
				toolTurns++
			}
			if s, ok := m.Content.(string); ok && m.Role == "user" {
				city = s
			}
		}
		type call struct{ name, args string }
		var calls []call
		text := ""
		switch {
		case req.Model == "looper":
			calls = []call{{"weather-forecast", fmt.Sprintf(`{"city":%q}`, city)}}
		case req.Model == "booker" && toolTurns == 0:
			calls = []call{{"weather-forecast", fmt.Sprintf(`{"city":%q}`, city)}}
		case req.Model == "booker":
			calls = []call{{"book_trip", `{"to":"Paris"}`}}
		case toolTurns == 0:
			calls = []call{{"weather-forecast", fmt.Sprintf(`{"city":%q}`, city)}, {"crm-lookup", `{"email":"ann@example.com"}`}}
		default:
			text = "Sunny in Paris. Ann is at Acme."
		}
		usage := map[string]int{"prompt_tokens": 80, "completion_tokens": 12, "total_tokens": 92}
		if len(calls) > 0 {
			usage = map[string]int{"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}
		}
		if !req.Stream {
			msg := map[string]any{"role": "assistant", "content": nil}
			finish := "stop"
			if text != "" {
				msg["content"] = text
			}
			var tcs []map[string]any
			for i, c := range calls {
				tcs = append(tcs, map[string]any{"id": fmt.Sprintf("call_%d_%d", toolTurns, i), "type": "function",
					"function": map[string]any{"name": c.name, "arguments": c.args}})
			}
			if len(tcs) > 0 {
				msg["tool_calls"], finish = tcs, "tool_calls"
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-loop", "object": "chat.completion", "created": 1723003500, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-loop", "object": "chat.completion.chunk", "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		for i, c := range calls {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_%d_%d", toolTurns, i), "type": "function",
				"function": map[string]any{"name": c.name, "arguments": ""}}}}, nil)
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": c.args}}}}, nil)
		}
		if text != "" {
			half := len(text) / 2
			chunk(map[string]any{"role": "assistant", "content": text[:half]}, nil)
			chunk(map[string]any{"content": text[half:]}, nil)
		}
		finish := "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
		chunk(map[string]any{}, finish)
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-loop", "object": "chat.completion.chunk", "model": req.Model, "choices": []any{}, "usage": usage})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *loopLLM) requests() []loopLLMRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]loopLLMRequest(nil), f.reqs...)
}

func (f *loopLLM) reset() {
	f.mu.Lock()
	f.reqs = nil
	f.mu.Unlock()
}

// loopEnv is a server whose `openai` provider is a loopLLM, with two
// connectors on real upstreams: weather (an API key per connection,
// echoed by its upstream as "account") and crm (no auth).
type loopEnv struct {
	*ienv
	llm *loopLLM
}

func newLoopEnv(t *testing.T) *loopEnv {
	t.Helper()
	fake := newLoopLLM(t)
	e := newIEnv(t, func(c *config.Config) {
		var models []config.Model
		for _, n := range []string{"agent", "booker", "looper"} {
			models = append(models, config.Model{Name: n, Capabilities: []string{"chat"}, MaxTokens: 128000, Pricing: &config.Pricing{Input: 1, Output: 2}})
		}
		c.Providers = []config.Provider{{Name: "openai", Type: "openai", BaseURL: fake.URL + "/v1", Timeout: config.Duration(5 * time.Second), Models: models}}
	})
	weather := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		city := r.URL.Query().Get("city")
		w.Header().Set("Content-Type", "application/json")
		if city == "Atlantis" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"no such city"}`))
			return
		}
		// The key itself would be redacted from the result: name its account.
		account := strings.ToUpper(strings.TrimPrefix(r.Header.Get("X-Api-Key"), "account-"))
		_ = json.NewEncoder(w).Encode(map[string]any{"city": city, "sky": "sunny", "account": account})
	})
	crm := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"name":"Ann","company":"Acme"}`))
	})
	e.connector(connectors.Connector{Name: "weather", BaseURL: weather.URL, Auth: connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-Api-Key", In: connectors.InHeader}},
		connectors.Action{Name: "forecast", Description: "The forecast for a city", Method: "GET", Path: "/forecast",
			Parameters: map[string]connectors.Parameter{"city": {Type: connectors.TypeString, Required: true, In: connectors.InQuery, Description: "City name"}}})
	e.connector(connectors.Connector{Name: "crm", BaseURL: crm.URL, Auth: connectors.Auth{Type: connectors.AuthNone}},
		connectors.Action{Name: "lookup", Description: "Find a contact by email", Method: "GET", Path: "/contacts",
			Parameters: map[string]connectors.Parameter{"email": {Type: connectors.TypeString, In: connectors.InQuery}}})
	e.connection("weather", client.ConnectionInput{ApiKey: ptr("account-default")})
	e.connection("weather", client.ConnectionInput{Name: ptr("acme"), ApiKey: ptr("account-acme")})
	return &loopEnv{ienv: e, llm: fake}
}

// key creates an API key with scopes and policy and returns a client for it.
func (e *loopEnv) key(t *testing.T, policy auth.Policy, scopes ...string) *client.ClientWithResponses {
	t.Helper()
	return e.ClientWithKey(t, e.secret(t, policy, scopes...))
}

// secret creates an API key with scopes and policy and returns it.
func (e *loopEnv) secret(t *testing.T, policy auth.Policy, scopes ...string) string {
	t.Helper()
	_, key, err := e.Server.Keys().Create(context.Background(), auth.NewAPIKeyInput{Name: "loop", Scopes: scopes, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// lax is a client for key whose requests may break the spec (to check
// how the server refuses them).
func (e *loopEnv) lax(t *testing.T, key string) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(e.URL, client.WithHTTPClient(e.HTTPClient(t, servertest.WithKey(key), servertest.AllowInvalidRequests())))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func userSays(s string) []client.Message {
	return []client.Message{{Role: client.MessageRoleUser, Content: s}}
}

func withConnection(name string) client.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set(tools.ConnectionHeader, name)
		return nil
	}
}

func TestContractToolLoop(t *testing.T) {
	e := newLoopEnv(t)
	appKey := e.secret(t, auth.Policy{}, auth.ScopeLLM, auth.ScopeInvoke)
	app := e.ClientWithKey(t, appKey)
	actions := []string{"weather.forecast", "crm.*"}

	t.Run("execute: two actions, then the answer", func(t *testing.T) {
		e.llm.reset()
		res, err := app.ChatWithResponse(bg, client.ChatRequest{Model: "openai/agent", Messages: userSays("Paris"), Actions: &actions, Execute: ptr(true)})
		if err != nil {
			t.Fatal(err)
		}
		cc := res.JSON200
		if cc == nil {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
		if cc.Message.Content != "Sunny in Paris. Ann is at Acme." || cc.FunctionCall != nil || cc.StopReason == nil || *cc.StopReason != "answer" || *cc.ModelCalls != 2 {
			t.Errorf("completion %s", res.Body)
		}
		// Usage summed over both model calls.
		if cc.PromptTokens != 130 || cc.CompletionTokens != 22 || cc.TotalTokens != 152 {
			t.Errorf("usage %d+%d=%d, want 130+22=152", cc.PromptTokens, cc.CompletionTokens, cc.TotalTokens)
		}
		if cc.Steps == nil || len(*cc.Steps) != 2 {
			t.Fatalf("steps %s", res.Body)
		}
		for i, want := range []struct{ action, tool, param string }{{"weather.forecast", "weather-forecast", "Paris"}, {"crm.lookup", "crm-lookup", "ann@example.com"}} {
			s := (*cc.Steps)[i]
			if s.Action != want.action || s.Tool != want.tool || s.Turn != 1 || s.Status == nil || *s.Status != 200 || s.Error != nil || s.CallId == nil {
				t.Errorf("step %d %+v", i, s)
			}
			if fmt.Sprint(s.Params) != fmt.Sprint(map[string]any{"city": "Paris"}) && fmt.Sprint(s.Params) != fmt.Sprint(map[string]any{"email": "ann@example.com"}) || !strings.Contains(fmt.Sprint(s.Params), want.param) {
				t.Errorf("step %d params %v", i, s.Params)
			}
		}
		reqs := e.llm.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d model calls upstream", len(reqs))
		}
		if got := strings.Join(reqs[0].toolNames(), ","); got != "crm-lookup,weather-forecast" {
			t.Errorf("tools offered %s", got)
		}
		if p := reqs[0].Tools[1].Function.Parameters; fmt.Sprint(p["required"]) != "[city]" || reqs[0].Tools[1].Function.Description != "The forecast for a city" {
			t.Errorf("weather-forecast offered as %+v", reqs[0].Tools[1].Function)
		}
		// The second call carries the calls and the results, in order.
		msgs := reqs[1].Messages
		if len(msgs) != 4 || msgs[1].Role != "assistant" || len(msgs[1].ToolCalls) != 2 || msgs[2].Role != "tool" || msgs[3].Role != "tool" ||
			msgs[2].ToolCallID != msgs[1].ToolCalls[0].ID || !strings.Contains(fmt.Sprint(msgs[2].Content), `"sky":"sunny"`) ||
			!strings.Contains(fmt.Sprint(msgs[2].Content), `"account":"DEFAULT"`) || !strings.Contains(fmt.Sprint(msgs[3].Content), `"company":"Acme"`) {
			t.Errorf("second call's messages %+v", msgs)
		}
		// Each run is in the invocation log with the request's id.
		rid := res.HTTPResponse.Header.Get("X-Request-Id")
		for _, c := range []string{"weather", "crm"} {
			log, err := e.admin.ListInvocationsWithResponse(bg, c, nil)
			if err != nil || log.JSON200 == nil || len(log.JSON200.Data) == 0 {
				t.Fatalf("invocations of %s: %v %s", c, err, log.Body)
			}
			inv := log.JSON200.Data[0]
			if inv.RequestId == nil || *inv.RequestId != rid || inv.Status == nil || *inv.Status != 200 {
				t.Errorf("invocation of %s %+v, want request %s", c, inv, rid)
			}
		}
	})

	t.Run("without execute the call is returned", func(t *testing.T) {
		e.llm.reset()
		before := e.invocations(t, "weather")
		res, err := app.ChatWithResponse(bg, client.ChatRequest{Model: "openai/agent", Messages: userSays("Paris"), Actions: &actions})
		if err != nil {
			t.Fatal(err)
		}
		cc := res.JSON200
		if cc == nil || cc.FunctionCall == nil || cc.FunctionCall.Name != "weather-forecast" || cc.FunctionCall.Arguments["city"] != "Paris" ||
			*cc.StopReason != "function_call" || *cc.ModelCalls != 1 || cc.Steps != nil {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
		if reqs := e.llm.requests(); len(reqs) != 1 || reqs[0].ParallelToolCalls == nil || *reqs[0].ParallelToolCalls {
			t.Errorf("upstream requests %+v", reqs)
		}
		if after := e.invocations(t, "weather"); after != before {
			t.Errorf("an action ran: %d invocations, were %d", after, before)
		}
	})

	t.Run("a failed run is fed back to the model", func(t *testing.T) {
		e.llm.reset()
		res, err := app.ChatWithResponse(bg, client.ChatRequest{Model: "openai/agent", Messages: userSays("Atlantis"), Actions: &actions, Execute: ptr(true)})
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON200 == nil || len(*res.JSON200.Steps) != 2 {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
		s := (*res.JSON200.Steps)[0]
		if s.Error == nil || s.Error.Code != "upstream_error" || s.Status == nil || *s.Status != 404 {
			t.Errorf("step %+v", s)
		}
		tool := fmt.Sprint(e.llm.requests()[1].Messages[2].Content)
		if !strings.Contains(tool, `"code":"upstream_error"`) || !strings.Contains(tool, "no such city") {
			t.Errorf("the model read %s", tool)
		}
	})

	t.Run("the Switchboard-Connection header chooses the connection", func(t *testing.T) {
		e.llm.reset()
		res, err := app.ChatWithResponse(bg, client.ChatRequest{Model: "openai/agent", Messages: userSays("Paris"), Actions: &[]string{"weather.forecast"}, Execute: ptr(true)}, withConnection("acme"))
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON200 == nil {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
		if tool := fmt.Sprint(e.llm.requests()[1].Messages[2].Content); !strings.Contains(tool, `"account":"ACME"`) {
			t.Errorf("the run used another connection: %s", tool)
		}
		log, _ := e.admin.ListInvocationsWithResponse(bg, "weather", nil)
		if inv := log.JSON200.Data[0]; inv.Connection == nil || *inv.Connection != "acme" {
			t.Errorf("invocation %+v", inv)
		}
	})

	t.Run("max steps", func(t *testing.T) {
		res, err := app.ChatWithResponse(bg, client.ChatRequest{Model: "openai/looper", Messages: userSays("Paris"), Actions: &actions, Execute: ptr(true), MaxSteps: ptr(3)})
		if err != nil {
			t.Fatal(err)
		}
		cc := res.JSON200
		if cc == nil || *cc.StopReason != "max_steps" || *cc.ModelCalls != 3 || len(*cc.Steps) != 2 || cc.FunctionCall == nil || cc.TotalTokens != 180 {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
	})

	t.Run("function-calling: a caller's function stops the loop", func(t *testing.T) {
		fns := []client.FunctionDefinition{{Name: "book_trip", Parameters: &map[string]interface{}{"type": "object", "properties": map[string]any{"to": map[string]any{"type": "string"}}, "required": []string{"to"}}}}
		res, err := app.CallFunctionWithResponse(bg, client.FunctionCallingRequest{Model: "openai/booker", Messages: userSays("Paris"), Functions: fns, Actions: &actions, Execute: ptr(true)})
		if err != nil {
			t.Fatal(err)
		}
		r := res.JSON200
		if r == nil || r.FunctionCall == nil || r.FunctionCall.Name != "book_trip" || r.ArgumentsValid == nil || !*r.ArgumentsValid ||
			*r.StopReason != "function_call" || len(*r.Steps) != 1 || (*r.Steps)[0].Action != "weather.forecast" || r.TotalTokens != 120 {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
	})

	t.Run("function-calling: actions only", func(t *testing.T) {
		res, err := app.CallFunctionWithResponse(bg, client.FunctionCallingRequest{Model: "openai/agent", Messages: userSays("Paris"), Actions: &actions, Execute: ptr(true)})
		if err != nil {
			t.Fatal(err)
		}
		r := res.JSON200
		if r == nil || r.FunctionCall != nil || r.Message == nil || r.Message.Content != "Sunny in Paris. Ann is at Acme." || *r.StopReason != "answer" || len(*r.Steps) != 2 {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
	})

	t.Run("invalid requests", func(t *testing.T) {
		tests := []struct {
			name   string
			c      *client.ClientWithResponses
			req    client.ChatRequest
			status int
			code   string
			want   string
		}{
			{"unknown action", app, client.ChatRequest{Actions: &[]string{"weather.forecast", "weather.nope"}}, 422, "validation_failed", "actions[1]"},
			{"malformed entry", app, client.ChatRequest{Actions: &[]string{"Weather Forecast"}}, 422, "validation_failed", "actions[0]"},
			{"unknown toolset", app, client.ChatRequest{Toolset: ptr("nope")}, 422, "validation_failed", `"toolset"`},
			{"maxSteps too large", e.lax(t, appKey), client.ChatRequest{Actions: &actions, MaxSteps: ptr(21)}, 422, "validation_failed", "maxSteps"},
			{"execute without actions", app, client.ChatRequest{Execute: ptr(true)}, 422, "validation_failed", `"actions"`},
			{"no invoke scope", e.key(t, auth.Policy{}, auth.ScopeLLM), client.ChatRequest{Actions: &actions}, 403, "forbidden", "invoke"},
			{"an action outside the policy", e.key(t, auth.Policy{Connectors: []string{"crm"}}, auth.ScopeLLM, auth.ScopeInvoke), client.ChatRequest{Actions: &actions}, 403, "forbidden", "actions[0]"},
			{"nothing the policy allows", e.key(t, auth.Policy{Connectors: []string{"crm"}}, auth.ScopeLLM, auth.ScopeInvoke), client.ChatRequest{Actions: &[]string{"weather.*"}}, 403, "forbidden", "none of the 1 actions"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				tc.req.Model, tc.req.Messages = "openai/agent", userSays("Paris")
				res, err := tc.c.ChatWithResponse(bg, tc.req)
				if err != nil {
					t.Fatal(err)
				}
				if res.StatusCode() != tc.status || !strings.Contains(string(res.Body), tc.code) || !strings.Contains(string(res.Body), tc.want) {
					t.Errorf("%d %s, want %d %s mentioning %s", res.StatusCode(), res.Body, tc.status, tc.code, tc.want)
				}
			})
		}
	})

	t.Run("the policy narrows a wildcard selection", func(t *testing.T) {
		e.llm.reset()
		crmOnly := e.key(t, auth.Policy{Connectors: []string{"crm"}}, auth.ScopeLLM, auth.ScopeInvoke)
		res, err := crmOnly.ChatWithResponse(bg, client.ChatRequest{Model: "openai/agent", Messages: userSays("Paris"), Actions: &[]string{"weather.*", "crm"}, Execute: ptr(true)})
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON200 == nil {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
		if got := strings.Join(e.llm.requests()[0].toolNames(), ","); got != "crm-lookup" {
			t.Errorf("tools offered %s", got)
		}
		// The model called weather-forecast anyway: not offered, not run.
		s := (*res.JSON200.Steps)[0]
		if s.Tool != "weather-forecast" || s.Action != "" || s.Error == nil || s.Error.Code != "not_found" {
			t.Errorf("step %+v", s)
		}
	})

	t.Run("a stored toolset", func(t *testing.T) {
		e.llm.reset()
		if _, err := (&tools.Toolsets{Store: e.Store}).Create(bg, tools.Toolset{Name: "travel", Tools: []string{"weather.forecast"}}); err != nil {
			t.Fatal(err)
		}
		res, err := app.ChatWithResponse(bg, client.ChatRequest{Model: "openai/agent", Messages: userSays("Paris"), Toolset: ptr("travel"), Actions: &[]string{"crm.lookup"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON200 == nil {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
		if got := strings.Join(e.llm.requests()[0].toolNames(), ","); got != "crm-lookup,weather-forecast" {
			t.Errorf("tools offered %s", got)
		}
	})
}

// invocations counts the invocation log entries of connector.
func (e *loopEnv) invocations(t *testing.T, connector string) int {
	t.Helper()
	res, err := e.admin.ListInvocationsWithResponse(bg, connector, nil)
	if err != nil || res.JSON200 == nil {
		t.Fatalf("invocations: %v", err)
	}
	return len(res.JSON200.Data)
}

func TestContractToolLoop_Streaming(t *testing.T) {
	e := newLoopEnv(t)
	_, key, err := e.Server.Keys().Create(bg, auth.NewAPIKeyInput{Name: "app", Scopes: []string{auth.ScopeLLM, auth.ScopeInvoke}})
	if err != nil {
		t.Fatal(err)
	}
	hc := e.HTTPClient(t)
	body := `{"model":"openai/agent","messages":[{"role":"user","content":"Paris"}],"actions":["weather.forecast","crm.lookup"],"execute":true,"stream":true}`
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/v1/chat", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var names []string
	var text strings.Builder
	var done client.ChatCompletion
	var steps []client.ToolLoopStep
	sc := bufio.NewScanner(res.Body)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data := []byte(strings.TrimPrefix(line, "data: "))
			names = append(names, name)
			switch name {
			case "delta":
				var d struct{ Text string }
				if err := json.Unmarshal(data, &d); err != nil {
					t.Fatal(err)
				}
				text.WriteString(d.Text)
			case "step":
				var s client.ToolLoopStep
				if err := json.Unmarshal(data, &s); err != nil {
					t.Fatal(err)
				}
				steps = append(steps, s)
			case "done":
				if err := json.Unmarshal(data, &done); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("event %s: %s", name, data)
			}
		}
	}
	if got := strings.Join(names, ","); got != "step,step,delta,delta,done" {
		t.Errorf("events %s", got)
	}
	if len(steps) != 2 || steps[0].Action != "weather.forecast" || steps[1].Action != "crm.lookup" || *steps[0].Status != 200 {
		t.Errorf("steps %+v", steps)
	}
	if text.String() != "Sunny in Paris. Ann is at Acme." || done.Message.Content != text.String() {
		t.Errorf("text %q, done %+v", text.String(), done.Message)
	}
	if done.PromptTokens != 130 || done.CompletionTokens != 22 || done.TotalTokens != 152 || done.Steps == nil || len(*done.Steps) != 2 || *done.StopReason != "answer" {
		t.Errorf("done %+v", done)
	}
	if reqs := e.llm.requests(); len(reqs) != 2 || !reqs[0].Stream || !reqs[1].Stream {
		t.Errorf("upstream calls %+v", reqs)
	}
}

// TestContractToolLoop_RunsCountAgainstTheRequestLimit: each action run is
// one request of the key's requests-per-minute limit; the run past it ends
// the loop with the usual 429.
func TestContractToolLoop_RunsCountAgainstTheRequestLimit(t *testing.T) {
	e := newLoopEnv(t)
	// The chat request and one run fit in 2; the second run does not.
	limited := e.key(t, auth.Policy{RateLimit: &auth.RateLimit{RequestsPerMinute: 2}}, auth.ScopeLLM, auth.ScopeInvoke)
	res, err := limited.ChatWithResponse(bg, client.ChatRequest{Model: "openai/agent", Messages: userSays("Paris"), Actions: &[]string{"weather.forecast", "crm.lookup"}, Execute: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusTooManyRequests || res.HTTPResponse.Header.Get("Retry-After") == "" || !strings.Contains(string(res.Body), "rate_limited") {
		t.Fatalf("%d %s", res.StatusCode(), res.Body)
	}
	if n := len(e.llm.requests()); n != 1 {
		t.Errorf("%d model calls; the refusal must end the loop", n)
	}
}
