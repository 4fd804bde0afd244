package llm

import (
	"context"
	"net/http"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

// TestCachedPromptTokensArePricedAtCachedInput: each provider's wire
// report of prompt tokens served from its cache (OpenAI
// prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens
// beside input_tokens and cache_creation_input_tokens, Gemini
// cachedContentTokenCount), streamed or not, becomes
// Usage.CachedPromptTokens within PromptTokens, and the recorded cost
// prices them at cachedInput (at input when cachedInput is unset).
func TestCachedPromptTokensArePricedAtCachedInput(t *testing.T) {
	cached := 0.25
	withCache := &config.Pricing{Input: 1, Output: 2, CachedInput: &cached}
	noCache := &config.Pricing{Input: 1, Output: 2}
	tests := []struct {
		name    string
		typ     string
		route   string
		handler func(t *testing.T) http.HandlerFunc
		path    string // the provider's base URL path
		pricing *config.Pricing
		stream  bool
		want    Usage
		cost    float64
	}{
		{name: "openai message", typ: TypeOpenAI, route: "POST /v1/chat/completions", path: "/v1", pricing: withCache,
			handler: func(t *testing.T) http.HandlerFunc { return serve(t, "openai/chat_completion_cached.json", 200) },
			want:    Usage{PromptTokens: 2006, CachedPromptTokens: 1920, CompletionTokens: 300}, cost: (86 + 1920*0.25 + 300*2) / 1e6},
		{name: "openai message without cachedInput price", typ: TypeOpenAI, route: "POST /v1/chat/completions", path: "/v1", pricing: noCache,
			handler: func(t *testing.T) http.HandlerFunc { return serve(t, "openai/chat_completion_cached.json", 200) },
			want:    Usage{PromptTokens: 2006, CachedPromptTokens: 1920, CompletionTokens: 300}, cost: (2006 + 300*2) / 1e6},
		{name: "openai stream", typ: TypeOpenAI, route: "POST /v1/chat/completions", path: "/v1", pricing: withCache, stream: true,
			handler: func(t *testing.T) http.HandlerFunc { return serveStream(t, "openai/chat_stream_cached.txt") },
			want:    Usage{PromptTokens: 1200, CachedPromptTokens: 1024, CompletionTokens: 50}, cost: (176 + 1024*0.25 + 50*2) / 1e6},
		{name: "anthropic message", typ: TypeAnthropic, route: "POST /v1/messages", path: "/v1", pricing: withCache,
			handler: func(t *testing.T) http.HandlerFunc { return serve(t, "anthropic/message_cached.json", 200) },
			// input_tokens 50 + cache writes 100 (priced as input) + cache reads 2000.
			want: Usage{PromptTokens: 2150, CachedPromptTokens: 2000, CompletionTokens: 300}, cost: (150 + 2000*0.25 + 300*2) / 1e6},
		{name: "anthropic stream", typ: TypeAnthropic, route: "POST /v1/messages", path: "/v1", pricing: withCache, stream: true,
			handler: func(t *testing.T) http.HandlerFunc { return serveStream(t, "anthropic/stream_cached.txt") },
			want:    Usage{PromptTokens: 1640, CachedPromptTokens: 1600, CompletionTokens: 120}, cost: (40 + 1600*0.25 + 120*2) / 1e6},
		{name: "gemini message", typ: TypeGemini, route: "POST /v1beta/models/m:generateContent", path: "/v1beta", pricing: withCache,
			handler: func(t *testing.T) http.HandlerFunc { return serve(t, "gemini/generate_cached.json", 200) },
			want:    Usage{PromptTokens: 3000, CachedPromptTokens: 2048, CompletionTokens: 200}, cost: (952 + 2048*0.25 + 200*2) / 1e6},
		{name: "gemini stream", typ: TypeGemini, route: "POST /v1beta/models/m:streamGenerateContent", path: "/v1beta", pricing: withCache, stream: true,
			handler: func(t *testing.T) http.HandlerFunc { return serveStream(t, "gemini/stream_cached.txt") },
			want:    Usage{PromptTokens: 1100, CachedPromptTokens: 1024, CompletionTokens: 30}, cost: (76 + 1024*0.25 + 30*2) / 1e6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newFake(t, map[string]http.HandlerFunc{tc.route: tc.handler(t)})
			m := config.Model{Name: "m", Capabilities: []string{CapChat}, MaxTokens: 8192, Pricing: tc.pricing}
			g, rec := newGateway(t, provider("p", tc.typ, up.URL+tc.path, m))
			r := &Request{Model: "p/m", Messages: []Message{{Role: RoleUser, Content: "What does the contract say about termination?"}}}
			var res *Result
			if tc.stream {
				st, err := g.Stream(context.Background(), OpChat, r)
				if err != nil {
					t.Fatal(err)
				}
				if res, _, err = drain(t, st); err != nil {
					t.Fatal(err)
				}
			} else {
				var err error
				if res, err = g.Complete(context.Background(), OpChat, r); err != nil {
					t.Fatal(err)
				}
			}
			if res.Usage != tc.want {
				t.Errorf("usage = %+v, want %+v", res.Usage, tc.want)
			}
			calls := rec.all()
			if len(calls) != 1 {
				t.Fatalf("recorded %d calls, want 1", len(calls))
			}
			if calls[0].Prompt != tc.want.PromptTokens || calls[0].Cost != usage.RoundUSD(tc.cost) {
				t.Errorf("recorded prompt %d cost %v, want %d and %v", calls[0].Prompt, calls[0].Cost, tc.want.PromptTokens, usage.RoundUSD(tc.cost))
			}
		})
	}
}
