package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

func anthropicFake(t *testing.T) *fake {
	return newFake(t, map[string]http.HandlerFunc{
		"POST /v1/messages": func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Model      string `json:"model"`
				Stream     bool   `json:"stream"`
				Tools      []any  `json:"tools"`
				ToolChoice *struct {
					Name string `json:"name"`
				} `json:"tool_choice"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			format := body.ToolChoice != nil && body.ToolChoice.Name == "weather_report"
			switch {
			case format && body.Stream:
				serveStream(t, "anthropic/stream_format.txt")(w, r)
			case format:
				serve(t, "anthropic/message_format.json", 200)(w, r)
			case body.Model == "limited":
				serve(t, "anthropic/error_429.json", 429, "retry-after", "7")(w, r)
			case body.Model == "overloaded":
				serve(t, "anthropic/error_529.json", 529)(w, r)
			case body.Model == "invalid":
				serve(t, "anthropic/error_400.json", 400)(w, r)
			case body.Model == "broken" && body.Stream:
				serveStream(t, "anthropic/stream_error.txt")(w, r)
			case body.Stream && len(body.Tools) > 0:
				serveStream(t, "anthropic/stream_tool_use.txt")(w, r)
			case body.Stream:
				serveStream(t, "anthropic/stream.txt")(w, r)
			case len(body.Tools) > 0:
				serve(t, "anthropic/message_tool_use.json", 200)(w, r)
			default:
				serve(t, "anthropic/message.json", 200)(w, r)
			}
		},
		"GET /v1/models": serve(t, "anthropic/models.json", 200),
		"POST /v1/messages/count_tokens": func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Model string `json:"model"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			if body.Model == "nocount" {
				http.NotFound(w, r)
				return
			}
			serve(t, "anthropic/count_tokens.json", 200)(w, r)
		},
	})
}

func TestAnthropicTranslatesToolConversation(t *testing.T) {
	up := anthropicFake(t)
	g, _ := newGateway(t, provider("anthropic", TypeAnthropic, up.URL+"/v1", chatModel("claude-3-5-haiku-latest")))
	res, err := g.Complete(context.Background(), OpCompatChat, toolRequest("anthropic/claude-3-5-haiku-latest"))
	if err != nil {
		t.Fatal(err)
	}
	got := up.last(t)
	assertJSON(t, got.Body, fixture(t, "anthropic/request_tools.json"))
	if got.Header.Get("x-api-key") != "sk-test-secret-anthropic_key" || got.Header.Get("anthropic-version") != AnthropicVersion {
		t.Errorf("headers %v", got.Header)
	}
	if got.Header.Get("Authorization") != "" {
		t.Error("Anthropic takes x-api-key, not Authorization")
	}
	want := ToolCall{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"location": "San Francisco, CA", "unit": "celsius"}`}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0] != want {
		t.Errorf("tool calls %+v", res.ToolCalls)
	}
	if !strings.HasPrefix(res.Text, "<thinking>") || res.FinishReason != FinishToolCalls || res.Usage != (Usage{PromptTokens: 384, CompletionTokens: 96}) {
		t.Errorf("result %+v", res)
	}
}

func TestAnthropicMessagesAndStreams(t *testing.T) {
	up := anthropicFake(t)
	g, _ := newGateway(t, provider("anthropic", TypeAnthropic, up.URL+"/v1", chatModel("claude-3-5-haiku-latest"), chatModel("broken")))
	ctx := context.Background()
	hi := []Message{{Role: RoleUser, Content: "Hello"}}

	t.Run("message", func(t *testing.T) {
		res, err := g.Complete(ctx, OpChat, &Request{Model: "anthropic/claude-3-5-haiku-latest", Messages: hi})
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "Hi! My name is Claude." || res.FinishReason != FinishStop || res.Usage != (Usage{PromptTokens: 2095, CompletionTokens: 503}) {
			t.Errorf("result %+v", res)
		}
		var sent map[string]any
		_ = json.Unmarshal(up.last(t).Body, &sent)
		if sent["max_tokens"] != float64(anthropicDefaultMaxTokens) {
			t.Errorf("max_tokens (required by Anthropic) = %v", sent["max_tokens"])
		}
	})
	t.Run("stream", func(t *testing.T) {
		st, err := g.Stream(ctx, OpChat, &Request{Model: "anthropic/claude-3-5-haiku-latest", Messages: hi})
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := drain(t, st)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "Hello!" || res.FinishReason != FinishStop || res.Usage != (Usage{PromptTokens: 25, CompletionTokens: 15}) {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("stream with tool_use", func(t *testing.T) {
		st, err := g.Stream(ctx, OpCompatChat, &Request{Model: "anthropic/claude-3-5-haiku-latest", Messages: hi, Tools: []Tool{weatherTool}})
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := drain(t, st)
		if err != nil {
			t.Fatal(err)
		}
		want := ToolCall{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: `{"location": "San Francisco, CA", "unit": "fahrenheit"}`}
		if len(res.ToolCalls) != 1 || res.ToolCalls[0] != want {
			t.Errorf("tool calls %+v", res.ToolCalls)
		}
		if res.Text != "Okay, let me check the weather." || res.FinishReason != FinishToolCalls || res.Usage != (Usage{PromptTokens: 472, CompletionTokens: 89}) {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("error event mid-stream", func(t *testing.T) {
		st, err := g.Stream(ctx, OpChat, &Request{Model: "anthropic/broken", Messages: hi})
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := drain(t, st)
		if errs.KindOf(err) != errs.Upstream || !strings.Contains(err.Error(), "overloaded_error: Overloaded") {
			t.Fatalf("err = %v", err)
		}
		if res.Text != "Partial" || res.Usage.PromptTokens != 25 {
			t.Errorf("partial %+v", res)
		}
	})
}

func TestAnthropicErrorsAndDiscovery(t *testing.T) {
	up := anthropicFake(t)
	p := provider("anthropic", TypeAnthropic, up.URL+"/v1", chatModel("limited"), chatModel("overloaded"), chatModel("invalid"))
	p.Discover = true
	g, _ := newGateway(t, p)
	ctx := context.Background()
	hi := []Message{{Role: RoleUser, Content: "Hello"}}
	for _, tc := range []struct {
		model    string
		kind     errs.Kind
		contains string
		retry    time.Duration
	}{
		{"limited", errs.RateLimited, "Number of request tokens has exceeded", 7 * time.Second},
		{"overloaded", errs.Upstream, "HTTP 529", 0},
		{"invalid", errs.Invalid, "max_tokens: 100000 > 8192", 0},
	} {
		t.Run(tc.model, func(t *testing.T) {
			_, err := g.Complete(ctx, OpChat, &Request{Model: "anthropic/" + tc.model, Messages: hi})
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != tc.kind || !strings.Contains(e.Message, tc.contains) || e.RetryAfter != tc.retry {
				t.Fatalf("err = %#v", err)
			}
		})
	}
	t.Run("discovery", func(t *testing.T) {
		if err := g.Catalog.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		m, err := g.Catalog.Lookup("anthropic/claude-3-7-sonnet-20250219")
		if err != nil {
			t.Fatal(err)
		}
		if !m.Has(CapChat) || m.CreatedAt.Format(time.DateOnly) != "2025-02-19" {
			t.Errorf("model %+v", m)
		}
		if q := up.last(t).Query; q != "limit=1000" {
			t.Errorf("query %q", q)
		}
	})
	t.Run("no embeddings", func(t *testing.T) {
		m, _ := g.Catalog.Lookup("anthropic/invalid")
		if _, err := m.provider.Embed(ctx, m, &EmbedRequest{Inputs: []string{"x"}}); err == nil {
			t.Fatal("Anthropic has no embeddings API")
		}
	})
}

// weatherFormat is a json_schema response format, carried to Anthropic by
// a forced tool.
var weatherFormat = &ResponseFormat{Type: FormatJSONSchema, Name: "weather_report", Description: "A weather report", Strict: true,
	Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}},"required":["city","celsius"],"additionalProperties":false}`)}

func TestAnthropicCarriesRequestFields(t *testing.T) {
	up := anthropicFake(t)
	vision := chatModel("claude-3-5-haiku-latest")
	vision.Capabilities = []string{CapChat, CapVision}
	g, _ := newGateway(t, provider("anthropic", TypeAnthropic, up.URL+"/v1", vision))
	ctx := context.Background()
	const model = "anthropic/claude-3-5-haiku-latest"
	user := func(s string) []Message { return []Message{{Role: RoleUser, Content: s}} }
	png := []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}
	for _, tc := range []struct {
		name string
		req  *Request
		// want is the exact body sent (a fixture), or wantHas fragments of it.
		want    string
		wantHas []string
		text    string
		finish  string
	}{
		{name: "images as base64 and url sources", want: "anthropic/request_image.json", req: &Request{Model: model, Messages: []Message{
			{Role: RoleSystem, Content: "Describe images."},
			{Role: RoleUser, Content: "What is this?", Parts: []Part{{Text: "What is this?"}, {Image: &Image{MediaType: "image/png", Data: png}}, {Image: &Image{URL: "https://example.com/cat.jpg"}}}},
		}}, text: "Hi! My name is Claude.", finish: FinishStop},
		{name: "json_schema through a forced tool", want: "anthropic/request_format.json",
			req:  &Request{Model: model, Messages: user("Weather in Paris as JSON"), ResponseFormat: weatherFormat},
			text: `{"city": "Paris", "celsius": 21}`, finish: FinishStop},
		{name: "json_schema beside the caller's tools forces any tool",
			req:     &Request{Model: model, Messages: user("Weather in Paris as JSON"), ResponseFormat: weatherFormat, Tools: []Tool{weatherTool}},
			wantHas: []string{`"tool_choice":{"type":"any"}`, `"name":"get_weather"`, `"name":"weather_report"`}},
		{name: "json_object through a forced tool with an object schema",
			req:     &Request{Model: model, Messages: user("JSON please"), ResponseFormat: &ResponseFormat{Type: FormatJSONObject}},
			wantHas: []string{`"tool_choice":{"type":"tool","name":"json_object"}`, `"input_schema":{"type":"object"}`}},
		{name: "tool_choice none with a format sends only the format's tool",
			req:     &Request{Model: model, Messages: user("JSON please"), ResponseFormat: weatherFormat, Tools: []Tool{weatherTool}, ToolChoice: &ToolChoice{Mode: ToolChoiceNone}},
			wantHas: []string{`"tools":[{"name":"weather_report"`, `"tool_choice":{"type":"tool","name":"weather_report"}`}},
		{name: "reasoning effort as a thinking budget added to the default max_tokens", want: "anthropic/request_thinking.json",
			req: &Request{Model: model, Messages: user("Hello"), ReasoningEffort: EffortMedium, User: "user-42"}},
		{name: "the caller's max_tokens bounds the thinking budget",
			req:     &Request{Model: model, Messages: user("Hello"), ReasoningEffort: EffortHigh, MaxTokens: ptr(2000)},
			wantHas: []string{`"max_tokens":2000`, `"thinking":{"type":"enabled","budget_tokens":1999}`}},
		{name: "strict tools",
			req:     &Request{Model: model, Messages: user("Hello"), Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`), Strict: true}}},
			wantHas: []string{`"tools":[{"name":"f","input_schema":{"type":"object"},"strict":true}]`}},
		{name: "a tool without parameters gets an empty object schema",
			req:     &Request{Model: model, Messages: user("Hello"), Tools: []Tool{{Name: "f"}}, ToolChoice: &ToolChoice{Mode: ToolChoiceRequired}},
			wantHas: []string{`"input_schema":{"type":"object","properties":{}}`, `"tool_choice":{"type":"any"}`}},
		{name: "top_p and stop sequences",
			req:     &Request{Model: model, Messages: user("Hello"), TopP: ptr(0.9), Stop: []string{"END"}, Temperature: ptr(0.0)},
			wantHas: []string{`"top_p":0.9`, `"stop_sequences":["END"]`, `"temperature":0`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := g.Complete(ctx, OpMessages, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			body := up.last(t).Body
			if tc.want != "" {
				assertJSON(t, body, fixture(t, tc.want))
			}
			for _, frag := range tc.wantHas {
				if !strings.Contains(string(body), frag) {
					t.Errorf("body lacks %s:\n%s", frag, body)
				}
			}
			if tc.text != "" && (res.Text != tc.text || res.FinishReason != tc.finish || len(res.ToolCalls) != 0) {
				t.Errorf("result %+v", res)
			}
		})
	}
	t.Run("json_schema streamed: the tool's input JSON as text", func(t *testing.T) {
		st, err := g.Stream(ctx, OpMessages, &Request{Model: model, Messages: user("Weather in Paris as JSON"), ResponseFormat: weatherFormat})
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := drain(t, st)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != `{"city": "Paris", "celsius": 21}` || res.FinishReason != FinishStop || len(res.ToolCalls) != 0 || res.Usage != (Usage{PromptTokens: 412, CompletionTokens: 38}) {
			t.Errorf("result %+v", res)
		}
	})
}

func TestAnthropicRefusesFieldsItCannotCarry(t *testing.T) {
	up := anthropicFake(t)
	g, _ := newGateway(t, provider("anthropic", TypeAnthropic, up.URL+"/v1", chatModel("claude-3-5-haiku-latest")))
	hi := []Message{{Role: RoleUser, Content: "Hello"}}
	const model = "anthropic/claude-3-5-haiku-latest"
	for _, tc := range []struct {
		name  string
		req   *Request
		param string
	}{
		{"n above 1", &Request{N: 2}, "n"},
		{"frequency_penalty", &Request{FrequencyPenalty: ptr(0.5)}, "frequency_penalty"},
		{"presence_penalty", &Request{PresencePenalty: ptr(0.5)}, "presence_penalty"},
		{"seed", &Request{Seed: ptr(int64(7))}, "seed"},
		{"passthrough fields, by name", &Request{Passthrough: map[string]json.RawMessage{"logprobs": json.RawMessage(`true`), "logit_bias": json.RawMessage(`{"1":2}`)}}, "logit_bias"},
		{"reasoning with max_tokens below the minimum budget", &Request{ReasoningEffort: EffortLow, MaxTokens: ptr(1000)}, "reasoning_effort"},
		{"reasoning with a forced format tool", &Request{ReasoningEffort: EffortLow, ResponseFormat: weatherFormat}, "reasoning_effort"},
		{"reasoning with a required tool", &Request{ReasoningEffort: EffortLow, Tools: []Tool{weatherTool}, ToolChoice: &ToolChoice{Mode: ToolChoiceRequired}}, "reasoning_effort"},
		{"reasoning with a temperature other than 1", &Request{ReasoningEffort: EffortLow, Temperature: ptr(0.2)}, "temperature"},
		{"a format named like a caller's tool", &Request{ResponseFormat: &ResponseFormat{Type: FormatJSONSchema, Name: "get_weather", Schema: json.RawMessage(`{"type":"object"}`)}, Tools: []Tool{weatherTool}}, "response_format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.requests())
			tc.req.Model, tc.req.Messages = model, hi
			_, err := g.Complete(context.Background(), OpMessages, tc.req)
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.Invalid || e.Details["param"] != tc.param || !strings.Contains(e.Message, tc.param) {
				t.Fatalf("err = %#v", err)
			}
			if len(up.requests()) != before {
				t.Error("a refused request reached the upstream")
			}
		})
	}
	t.Run("a temperature of 1 with reasoning is carried", func(t *testing.T) {
		if _, err := g.Complete(context.Background(), OpMessages, &Request{Model: model, Messages: hi, ReasoningEffort: EffortLow, Temperature: ptr(1.0)}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAnthropicCountTokens(t *testing.T) {
	up := anthropicFake(t)
	g, rec := newGateway(t, provider("anthropic", TypeAnthropic, up.URL+"/v1", chatModel("claude-3-5-haiku-latest"), chatModel("nocount")))
	ctx := context.Background()
	req := func(model string) *Request {
		return &Request{Model: model, Messages: []Message{{Role: RoleSystem, Content: "Be brief."}, {Role: RoleUser, Content: "Hello"}}, Tools: []Tool{weatherTool}}
	}
	for _, tc := range []struct {
		name      string
		model     string
		tokens    int
		estimated bool
	}{
		{"Anthropic's own count", "anthropic/claude-3-5-haiku-latest", 2095, false},
		{"estimated when the upstream has no count_tokens", "anthropic/nocount", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := g.CountTokens(ctx, OpMessages, req(tc.model))
			if err != nil {
				t.Fatal(err)
			}
			got := up.last(t)
			if got.Path != "/v1/messages/count_tokens" || strings.Contains(string(got.Body), "max_tokens") || !strings.Contains(string(got.Body), `"system":"Be brief."`) {
				t.Errorf("sent %s %s", got.Path, got.Body)
			}
			if res.Estimated != tc.estimated || (tc.tokens > 0 && res.InputTokens != tc.tokens) || res.InputTokens <= 0 {
				t.Errorf("count %+v", res)
			}
		})
	}
	if calls := rec.all(); len(calls) != 0 {
		t.Errorf("counting recorded usage: %+v", calls)
	}
}
