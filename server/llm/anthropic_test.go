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
				Model  string `json:"model"`
				Stream bool   `json:"stream"`
				Tools  []any  `json:"tools"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			switch {
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
	t.Run("penalties are not sent", func(t *testing.T) {
		_, err := g.Complete(ctx, OpChat, &Request{Model: "anthropic/claude-3-5-haiku-latest", Messages: hi, FrequencyPenalty: ptr(1.0), PresencePenalty: ptr(1.0), TopP: ptr(0.9)})
		if err != nil {
			t.Fatal(err)
		}
		body := string(up.last(t).Body)
		if strings.Contains(body, "penalty") || !strings.Contains(body, `"top_p":0.9`) {
			t.Errorf("body %s", body)
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
