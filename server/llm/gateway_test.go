package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

func problemsOf(t *testing.T, err error) map[string]string {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Validation {
		t.Fatalf("want a 422 validation error, got %v", err)
	}
	ps, _ := e.Details["problems"].([]errs.Problem)
	out := map[string]string{}
	for _, p := range ps {
		out[p.Field] = p.Problem
	}
	return out
}

func TestKnobValidation(t *testing.T) {
	up := newFake(t, map[string]http.HandlerFunc{"POST /v1/chat/completions": serve(t, "openai/chat_completion.json", 200)})
	small := chatModel("small")
	small.MaxTokens = 1000
	g, _ := newGateway(t, provider("openai", TypeOpenAI, up.URL+"/v1", small))
	hi := []Message{{Role: RoleUser, Content: "Hi"}}
	tests := []struct {
		name string
		req  Request
		want []string // fields with a problem; nil = valid
	}{
		{"all in range", Request{Temperature: ptr(2.0), TopP: ptr(0.0), FrequencyPenalty: ptr(-2.0), PresencePenalty: ptr(2.0), MaxTokens: ptr(1000)}, nil},
		{"temperature high", Request{Temperature: ptr(2.01)}, []string{"temperature"}},
		{"temperature negative", Request{Temperature: ptr(-0.1)}, []string{"temperature"}},
		{"topP over 1", Request{TopP: ptr(1.5)}, []string{"topP"}},
		{"penalties out", Request{FrequencyPenalty: ptr(-2.5), PresencePenalty: ptr(3.0)}, []string{"frequencyPenalty", "presencePenalty"}},
		{"maxTokens zero", Request{MaxTokens: ptr(0)}, []string{"maxTokens"}},
		{"maxTokens over the model limit", Request{MaxTokens: ptr(1001)}, []string{"maxTokens"}},
		{"every knob at once", Request{Temperature: ptr(9.0), TopP: ptr(-1.0), FrequencyPenalty: ptr(5.0), PresencePenalty: ptr(-5.0), MaxTokens: ptr(5000)},
			[]string{"temperature", "topP", "frequencyPenalty", "presencePenalty", "maxTokens"}},
		{"too many stops", Request{Stop: []string{"a", "b", "c", "d", "e"}}, []string{"stop"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Model, r.Messages = "openai/small", hi
			_, err := g.Complete(context.Background(), OpChat, &r)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("valid request refused: %v", err)
				}
				return
			}
			ps := problemsOf(t, err)
			if len(ps) != len(tc.want) {
				t.Errorf("problems %v, want fields %v", ps, tc.want)
			}
			for _, f := range tc.want {
				if ps[f] == "" {
					t.Errorf("no problem for %s in %v", f, ps)
				}
			}
		})
	}
}

func TestRequestValidation(t *testing.T) {
	g, _ := newGateway(t, provider("openai", TypeOpenAI, "http://127.0.0.1:9/v1", chatModel("m")))
	ctx := context.Background()
	t.Run("missing fields", func(t *testing.T) {
		ps := problemsOf(t, func() error { _, err := g.Complete(ctx, OpChat, &Request{}); return err }())
		if ps["model"] == "" || ps["messages"] == "" {
			t.Errorf("problems %v", ps)
		}
		ps = problemsOf(t, func() error { _, err := g.Complete(ctx, OpGenerate, &Request{Model: "openai/m"}); return err }())
		if ps["prompt"] == "" {
			t.Errorf("problems %v", ps)
		}
	})
	t.Run("roles", func(t *testing.T) {
		ps := problemsOf(t, func() error {
			_, err := g.Complete(ctx, OpChat, &Request{Model: "openai/m", Messages: []Message{{Role: "wizard", Content: "x"}, {Role: RoleTool, Content: "x"}, {Content: "x"}}})
			return err
		}())
		if len(ps) != 3 || ps["messages[0].role"] == "" || ps["messages[1].role"] == "" || ps["messages[2].role"] == "" {
			t.Errorf("problems %v", ps)
		}
		ps = problemsOf(t, func() error {
			_, err := g.Complete(ctx, OpCompatChat, &Request{Model: "openai/m", Messages: []Message{{Role: RoleTool, Content: "x"}}})
			return err
		}())
		if ps["messages[0].tool_call_id"] == "" {
			t.Errorf("problems %v", ps)
		}
	})
	t.Run("unknown model is 404", func(t *testing.T) {
		_, err := g.Complete(ctx, OpChat, &Request{Model: "openai/nope", Messages: []Message{{Role: RoleUser, Content: "x"}}})
		if errs.KindOf(err) != errs.NotFound {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("missing capability is 400", func(t *testing.T) {
		_, err := g.Complete(ctx, OpChat, &Request{Model: "local/hash-embed-384", Messages: []Message{{Role: RoleUser, Content: "x"}}})
		if errs.KindOf(err) != errs.Invalid || !strings.Contains(err.Error(), "does not support chat") {
			t.Errorf("err = %v", err)
		}
		_, err = g.Embed(ctx, "openai/m", EmbedRequest{Inputs: []string{"x"}, Dimensions: nil}, "text")
		if errs.KindOf(err) != errs.Invalid || !strings.Contains(err.Error(), "does not support embeddings") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("embedding input", func(t *testing.T) {
		ps := problemsOf(t, func() error {
			_, err := g.Embed(ctx, "", EmbedRequest{Inputs: nil, Dimensions: nil}, "text")
			return err
		}())
		if ps["model"] == "" || ps["text"] == "" {
			t.Errorf("problems %v", ps)
		}
		ps = problemsOf(t, func() error {
			_, err := g.Embed(ctx, "local/hash-embed-384", EmbedRequest{Inputs: []string{"a", " "}, Dimensions: nil}, "input")
			return err
		}())
		if ps["input[1]"] == "" {
			t.Errorf("problems %v", ps)
		}
	})
}

func TestFallbacks(t *testing.T) {
	var primaryCalls atomic.Int32
	primary := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			primaryCalls.Add(1)
			switch model := readModel(r); model {
			case "limited":
				serve(t, "openai/error_429.json", 429, "Retry-After", "3")(w, r)
			case "bad":
				serve(t, "openai/error_400.json", 400)(w, r)
			default:
				serve(t, "openai/error_500.json", 500)(w, r)
			}
		},
	})
	secondary := anthropicFake(t)
	g, rec := newGateway(t,
		provider("openai", TypeOpenAI, primary.URL+"/v1", chatModel("limited", "openai/down", "anthropic/claude-3-5-haiku-latest"),
			chatModel("down", "anthropic/claude-3-5-haiku-latest"), chatModel("bad", "anthropic/claude-3-5-haiku-latest"),
			chatModel("alone", "nowhere/missing")),
		provider("anthropic", TypeAnthropic, secondary.URL+"/v1", chatModel("claude-3-5-haiku-latest")),
	)
	ctx := context.Background()
	hi := []Message{{Role: RoleUser, Content: "Hi"}}

	t.Run("429 then 5xx then an answer", func(t *testing.T) {
		primaryCalls.Store(0)
		res, err := g.Complete(ctx, OpChat, &Request{Model: "openai/limited", Messages: hi})
		if err != nil {
			t.Fatal(err)
		}
		if res.Model.ID != "anthropic/claude-3-5-haiku-latest" || primaryCalls.Load() != 2 {
			t.Errorf("answered by %s after %d primary calls", res.Model.ID, primaryCalls.Load())
		}
		if strings.Join(res.FallbackFrom, ",") != "openai/limited,openai/down" {
			t.Errorf("fallbackFrom %v", res.FallbackFrom)
		}
		calls := rec.all()
		if last := calls[len(calls)-1]; last.Model != "anthropic/claude-3-5-haiku-latest" {
			t.Errorf("usage recorded for %s", last.Model)
		}
	})
	t.Run("a 400 does not fall back", func(t *testing.T) {
		_, err := g.Complete(ctx, OpChat, &Request{Model: "openai/bad", Messages: hi})
		if errs.KindOf(err) != errs.Invalid {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("streams fall back while opening", func(t *testing.T) {
		st, err := g.Stream(ctx, OpChat, &Request{Model: "openai/down", Messages: hi})
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := drain(t, st)
		if err != nil || res.Model.ID != "anthropic/claude-3-5-haiku-latest" || res.Text != "Hello!" {
			t.Errorf("res %+v err %v", res, err)
		}
	})
	t.Run("unknown fallbacks are skipped", func(t *testing.T) {
		_, err := g.Complete(ctx, OpChat, &Request{Model: "openai/alone", Messages: hi})
		if errs.KindOf(err) != errs.Upstream {
			t.Errorf("err = %v", err)
		}
	})
}

func readModel(r *http.Request) string {
	var b struct{ Model string }
	_ = json.NewDecoder(r.Body).Decode(&b)
	return b.Model
}

func TestUpstreamTimeoutsAndConnectionErrors(t *testing.T) {
	slow := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		},
	})
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	p := provider("slow", TypeOpenAI, slow.URL+"/v1", chatModel("m"))
	p.Timeout = config.Duration(150 * time.Millisecond)
	g, _ := newGateway(t, p, provider("gone", TypeOpenAI, closedURL+"/v1", chatModel("m")))
	hi := []Message{{Role: RoleUser, Content: "Hi"}}

	start := time.Now()
	_, err := g.Complete(context.Background(), OpChat, &Request{Model: "slow/m", Messages: hi})
	if errs.KindOf(err) != errs.UpstreamTimeout || errs.KindOf(err).Status() != 504 {
		t.Errorf("slow upstream: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the timeout fired after %v", d)
	}
	st, err := g.Stream(context.Background(), OpChat, &Request{Model: "slow/m", Messages: hi})
	if errs.KindOf(err) != errs.UpstreamTimeout {
		t.Errorf("slow stream: %v %v", st, err)
	}
	_, err = g.Complete(context.Background(), OpChat, &Request{Model: "gone/m", Messages: hi})
	if errs.KindOf(err) != errs.Upstream || errs.KindOf(err).Status() != 502 || !strings.Contains(err.Error(), "could not reach provider \"gone\"") {
		t.Errorf("closed upstream: %v", err)
	}
	if strings.Contains(err.Error(), closedURL) {
		t.Errorf("the message names the URL: %v", err)
	}
}

func TestStreamCancelPropagatesUpstream(t *testing.T) {
	cancelled := make(chan struct{})
	up := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fl := w.(http.Flusher)
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tick %d \"}}]}\n\n", i); err != nil {
					break
				}
				fl.Flush()
				select {
				case <-r.Context().Done():
					close(cancelled)
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		},
	})
	g, rec := newGateway(t, provider("openai", TypeOpenAI, up.URL+"/v1", chatModel("m")))
	ctx, cancel := context.WithCancel(auth.WithPrincipal(context.Background(), &auth.Principal{ID: "key_1"}))
	st, err := g.Stream(ctx, OpChat, &Request{Model: "openai/m", Messages: []Message{{Role: RoleUser, Content: "count"}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := st.Next(); err != nil {
			t.Fatal(err)
		}
	}
	cancel() // the caller went away
	select {
	case <-cancelled:
	case <-time.After(3 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
	st.Close()
	calls := rec.all()
	if len(calls) != 1 || calls[0].Principal != "key_1" || calls[0].Completion == 0 || calls[0].Prompt == 0 {
		t.Errorf("the partial stream's usage must be recorded (estimated): %+v", calls)
	}
}

func TestEstimatedUsage(t *testing.T) {
	up := newFake(t, map[string]http.HandlerFunc{"POST /v1/chat/completions": serve(t, "openai/chat_completion_no_usage.json", 200)})
	g, rec := newGateway(t, provider("ollama", TypeOpenAI, up.URL+"/v1", chatModel("llama3.1:8b")))
	res, err := g.Complete(context.Background(), OpChat, &Request{Model: "ollama/llama3.1:8b", Messages: []Message{{Role: RoleUser, Content: "Why is the sky blue?"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := CountTokens("llama3.1:8b", "The sky is blue because of Rayleigh scattering.")
	if !res.Usage.Estimated || res.Usage.CompletionTokens != want || res.Usage.PromptTokens < 8 {
		t.Errorf("usage %+v, want %d completion tokens", res.Usage, want)
	}
	if calls := rec.all(); len(calls) != 1 || calls[0].Completion != want {
		t.Errorf("recorded %+v", calls)
	}
}

func TestCallFunction(t *testing.T) {
	var reply atomic.Value
	up := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(reply.Load().(string)))
		},
	})
	g, _ := newGateway(t, provider("openai", TypeOpenAI, up.URL+"/v1", chatModel("m")))
	call := func(name, args string) string {
		return fmt.Sprintf(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":%q,"arguments":%q}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60}}`, name, args)
	}
	fns := []FunctionDef{{Name: "get_weather", Description: "Weather", Parameters: weatherTool.Parameters},
		{Name: "set_alarm", Parameters: []byte(`{"type":"object","properties":{"hour":{"type":"integer"},"days":{"type":"array","items":{"type":"string","enum":["mon","tue"]}}},"required":["hour"]}`)}}
	tests := []struct {
		name     string
		reply    string
		valid    bool
		problems []string
	}{
		{"valid", call("get_weather", `{"location":"Paris","unit":"celsius"}`), true, nil},
		{"integer given as 7.0 is an integer", call("set_alarm", `{"hour":7.0,"days":["mon"]}`), true, nil},
		{"missing required", call("get_weather", `{"unit":"celsius"}`), false, []string{"functionCall.arguments.location"}},
		{"wrong type", call("set_alarm", `{"hour":"seven"}`), false, []string{"functionCall.arguments.hour"}},
		{"not an integer", call("set_alarm", `{"hour":7.5}`), false, []string{"functionCall.arguments.hour"}},
		{"enum", call("get_weather", `{"location":"Paris","unit":"kelvin"}`), false, []string{"functionCall.arguments.unit"}},
		{"nested enum", call("set_alarm", `{"hour":7,"days":["mon","sun"]}`), false, []string{"functionCall.arguments.days[1]"}},
		{"undeclared parameter", call("get_weather", `{"location":"Paris","when":"now"}`), false, []string{"functionCall.arguments.when"}},
		{"undeclared function", call("launch_rockets", `{}`), false, []string{"functionCall.name"}},
		{"arguments not JSON", call("get_weather", `{"location":`), false, []string{"functionCall.arguments"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reply.Store(tc.reply)
			res, err := g.CallFunction(context.Background(), &Request{Model: "openai/m", Messages: []Message{{Role: RoleUser, Content: "Weather in Paris?"}}}, fns)
			if err != nil {
				t.Fatal(err)
			}
			if res.Call == nil || res.Valid != tc.valid {
				t.Fatalf("call %+v valid %v problems %v", res.Call, res.Valid, res.Problems)
			}
			got := map[string]bool{}
			for _, p := range res.Problems {
				got[p.Field] = true
			}
			for _, f := range tc.problems {
				if !got[f] {
					t.Errorf("no problem at %s: %+v", f, res.Problems)
				}
			}
			if len(res.Problems) != len(tc.problems) {
				t.Errorf("problems %+v, want %v", res.Problems, tc.problems)
			}
		})
	}
	t.Run("no call", func(t *testing.T) {
		reply.Store(string(fixture(t, "openai/chat_completion.json")))
		res, err := g.CallFunction(context.Background(), &Request{Model: "openai/m", Messages: []Message{{Role: RoleUser, Content: "Hi"}}}, fns)
		if err != nil || res.Call != nil || res.Text == "" || res.Valid {
			t.Fatalf("res %+v err %v", res, err)
		}
	})
	t.Run("sent as tools with parallel calls off", func(t *testing.T) {
		body := string(up.last(t).Body)
		if !strings.Contains(body, `"tool_choice":"auto"`) || !strings.Contains(body, `"parallel_tool_calls":false`) || !strings.Contains(body, `"name":"set_alarm"`) {
			t.Errorf("body %s", body)
		}
	})
	t.Run("invalid definitions are a 422", func(t *testing.T) {
		bad := []FunctionDef{
			{Name: "bad name!"},
			{Name: "dup"}, {Name: "dup"},
			{Name: "arr", Parameters: []byte(`{"type":"array"}`)},
			{Name: "req", Parameters: []byte(`{"type":"object","properties":{"a":{"type":"strin"}},"required":["b"]}`)},
		}
		ps := problemsOf(t, func() error {
			_, err := g.CallFunction(context.Background(), &Request{Model: "openai/m", Temperature: ptr(3.0), Messages: []Message{{Role: RoleUser, Content: "x"}}}, bad)
			return err
		}())
		for _, f := range []string{"functions[0].name", "functions[2].name", "functions[3].parameters.type", "functions[4].parameters.properties.a.type", "functions[4].parameters.required[0]", "temperature"} {
			if ps[f] == "" {
				t.Errorf("no problem at %s: %v", f, ps)
			}
		}
	})
}
