package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// drain reads a stream to the end and returns its result.
func drain(t *testing.T, st *ResultStream) (*Result, []Chunk, error) {
	t.Helper()
	defer st.Close()
	var chunks []Chunk
	for {
		c, err := st.Next()
		if err == io.EOF {
			return st.Result(), chunks, nil
		}
		if err != nil {
			return st.Result(), chunks, err
		}
		chunks = append(chunks, c)
	}
}

func TestOpenAITranslatesToolConversation(t *testing.T) {
	up := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": serve(t, "openai/chat_completion_tool_calls.json", 200),
	})
	g, rec := newGateway(t, provider("openai", TypeOpenAI, up.URL+"/v1", chatModel("gpt-4o-mini")))
	res, err := g.Complete(context.Background(), OpCompatChat, toolRequest("openai/gpt-4o-mini"))
	if err != nil {
		t.Fatal(err)
	}
	got := up.last(t)
	assertJSON(t, got.Body, fixture(t, "openai/request_tools.json"))
	if h := got.Header.Get("Authorization"); h != "Bearer sk-test-secret-openai_key" {
		t.Errorf("Authorization = %q", h)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "get_current_weather" || res.ToolCalls[0].ID != "call_abc123" {
		t.Fatalf("tool calls = %+v", res.ToolCalls)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(res.ToolCalls[0].Arguments), &args); err != nil || args["location"] != "Boston, MA" {
		t.Errorf("arguments = %q", res.ToolCalls[0].Arguments)
	}
	if res.FinishReason != FinishToolCalls || res.Usage != (Usage{PromptTokens: 82, CompletionTokens: 17}) {
		t.Errorf("finish %q usage %+v", res.FinishReason, res.Usage)
	}
	calls := rec.all()
	if len(calls) != 1 || calls[0].Model != "openai/gpt-4o-mini" || calls[0].Prompt != 82 || calls[0].Completion != 17 {
		t.Fatalf("recorded %+v", calls)
	}
	if want := (82*0.15 + 17*0.60) / 1e6; calls[0].Cost != want {
		t.Errorf("cost = %v, want %v", calls[0].Cost, want)
	}
}

func TestOpenAIChatAndGenerate(t *testing.T) {
	up := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": serve(t, "openai/chat_completion.json", 200),
		"POST /v1/completions":      serve(t, "openai/completion.json", 200),
	})
	g, _ := newGateway(t, provider("openai", TypeOpenAI, up.URL+"/v1", chatModel("gpt-4o-mini"),
		config.Model{Name: "gpt-3.5-turbo-instruct", Capabilities: []string{CapCompletion}, MaxTokens: 4096}))
	ctx := context.Background()

	t.Run("chat", func(t *testing.T) {
		res, err := g.Complete(ctx, OpChat, &Request{Model: "openai/gpt-4o-mini", Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "Hello! How can I assist you today?" || res.Usage.Total() != 29 || res.Usage.Estimated || res.FinishReason != FinishStop {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("generate on a chat model sends one user message", func(t *testing.T) {
		_, err := g.Complete(ctx, OpGenerate, &Request{Model: "openai/gpt-4o-mini", Prompt: "Say hi", MaxTokens: ptr(5)})
		if err != nil {
			t.Fatal(err)
		}
		assertJSON(t, up.last(t).Body, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hi"}],"max_tokens":5}`))
	})
	t.Run("generate on a completion model uses /completions", func(t *testing.T) {
		res, err := g.Complete(ctx, OpGenerate, &Request{Model: "openai/gpt-3.5-turbo-instruct", Prompt: "Say this is a test", MaxTokens: ptr(7), Temperature: ptr(0.0)})
		if err != nil {
			t.Fatal(err)
		}
		got := up.last(t)
		if got.Path != "/v1/completions" {
			t.Fatalf("path %s", got.Path)
		}
		assertJSON(t, got.Body, []byte(`{"model":"gpt-3.5-turbo-instruct","prompt":["Say this is a test"],"max_tokens":7,"temperature":0}`))
		if res.Text != "\n\nThis is indeed a test" || res.FinishReason != FinishLength || res.Usage.Total() != 12 {
			t.Errorf("result %+v", res)
		}
	})
}

func TestOpenAIStreams(t *testing.T) {
	up := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Tools []any `json:"tools"`
				Model string
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			switch {
			case body.Model == "broken":
				serveStream(t, "openai/chat_stream_error.txt")(w, r)
			case len(body.Tools) > 0:
				serveStream(t, "openai/chat_stream_tool_calls.txt")(w, r)
			default:
				serveStream(t, "openai/chat_stream.txt")(w, r)
			}
		},
	})
	g, rec := newGateway(t, provider("openai", TypeOpenAI, up.URL+"/v1", chatModel("gpt-4o-mini"), chatModel("broken")))
	ctx := context.Background()

	t.Run("text with usage", func(t *testing.T) {
		st, err := g.Stream(ctx, OpChat, &Request{Model: "openai/gpt-4o-mini", Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		res, chunks, err := drain(t, st)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "Hello! How can I help?" || res.FinishReason != FinishStop || res.Usage != (Usage{PromptTokens: 9, CompletionTokens: 6}) {
			t.Errorf("result %+v", res)
		}
		if len(chunks) < 3 {
			t.Errorf("got %d chunks, want the deltas one by one", len(chunks))
		}
		var sent struct {
			Stream        bool `json:"stream"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		_ = json.Unmarshal(up.last(t).Body, &sent)
		if !sent.Stream || !sent.StreamOptions.IncludeUsage {
			t.Errorf("upstream request must ask for usage in the stream: %s", up.last(t).Body)
		}
		if calls := rec.all(); calls[len(calls)-1].Prompt != 9 || calls[len(calls)-1].Completion != 6 {
			t.Errorf("recorded %+v", calls)
		}
	})
	t.Run("tool call deltas are assembled", func(t *testing.T) {
		st, err := g.Stream(ctx, OpCompatChat, &Request{Model: "openai/gpt-4o-mini", Messages: []Message{{Role: RoleUser, Content: "Weather?"}}, Tools: []Tool{weatherTool}})
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := drain(t, st)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.ToolCalls) != 1 || res.ToolCalls[0] != (ToolCall{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_weather", Arguments: `{"location":"Paris"}`}) {
			t.Errorf("tool calls %+v", res.ToolCalls)
		}
		if res.FinishReason != FinishToolCalls || res.Usage.Total() != 71 {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("error mid-stream", func(t *testing.T) {
		st, err := g.Stream(ctx, OpChat, &Request{Model: "openai/broken", Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := drain(t, st)
		if errs.KindOf(err) != errs.Upstream || !strings.Contains(err.Error(), "The server had an error") {
			t.Fatalf("err = %v", err)
		}
		if res.Text != "Partial" || !res.Usage.Estimated || res.Usage.CompletionTokens == 0 {
			t.Errorf("partial result %+v", res)
		}
	})
}

func TestOpenAIEmbeddingsAndDiscovery(t *testing.T) {
	up := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/embeddings": serve(t, "openai/embeddings.json", 200),
		"GET /v1/models":      serve(t, "openai/models.json", 200),
	})
	p := provider("vllm", TypeOpenAI, up.URL+"/v1", config.Model{Name: "text-embedding-3-small", Capabilities: []string{CapEmbeddings}, Dimensions: 3})
	p.Discover = true
	g, _ := newGateway(t, p)
	ctx := context.Background()

	res, err := g.Embed(ctx, "vllm/text-embedding-3-small", EmbedRequest{Inputs: []string{"hello", "world"}, Dimensions: nil}, "input")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Vectors) != 2 || res.Vectors[0][0] != float32(0.0023064255) || res.Vectors[1][2] != float32(0.0333) || res.Usage.PromptTokens != 8 {
		t.Errorf("result %+v", res)
	}
	assertJSON(t, up.last(t).Body, []byte(`{"input":["hello","world"],"model":"text-embedding-3-small","encoding_format":"float"}`))

	if err := g.Catalog.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := g.Catalog.Lookup("vllm/Qwen/Qwen2.5-7B-Instruct")
	if err != nil {
		t.Fatal(err)
	}
	if !m.Discovered || m.MaxTokens != 32768 || !m.Has(CapChat) || m.CreatedAt.Unix() != 1734000000 {
		t.Errorf("discovered %+v", m)
	}
	if m, _ := g.Catalog.Lookup("vllm/text-embedding-3-small"); m.Discovered || m.Dimensions != 3 {
		t.Errorf("a configured model must win over its discovered twin: %+v", m)
	}
	if m, _ := g.Catalog.Resolve("gpt-4o-mini"); m == nil || m.ID != "vllm/gpt-4o-mini" {
		t.Errorf("bare name resolves to %+v", m)
	}
}

func TestOpenAIUpstreamErrors(t *testing.T) {
	up := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			var body struct{ Model string }
			_ = json.NewDecoder(r.Body).Decode(&body)
			switch body.Model {
			case "bad-request":
				serve(t, "openai/error_400.json", 400)(w, r)
			case "bad-key":
				serve(t, "openai/error_401.json", 401)(w, r)
			case "limited":
				serve(t, "openai/error_429.json", 429, "Retry-After", "20")(w, r)
			case "limited-ms":
				serve(t, "openai/error_429.json", 429, "Retry-After-Ms", "1500")(w, r)
			case "down":
				serve(t, "openai/error_500.json", 500)(w, r)
			case "gateway":
				w.WriteHeader(http.StatusBadGateway)
				_, _ = w.Write([]byte("<html>bad gateway</html>"))
			}
		},
	})
	g, _ := newGateway(t, provider("openai", TypeOpenAI, up.URL+"/v1", chatModel("bad-request"), chatModel("bad-key"),
		chatModel("limited"), chatModel("limited-ms"), chatModel("down"), chatModel("gateway")))
	tests := []struct {
		model      string
		kind       errs.Kind
		contains   string
		retryAfter time.Duration
	}{
		{"bad-request", errs.Invalid, "max_tokens is too large: 200000", 0},
		{"bad-key", errs.Upstream, "refused Switchboard's credentials", 0},
		{"limited", errs.RateLimited, "Rate limit reached for gpt-4o-mini", 20 * time.Second},
		{"limited-ms", errs.RateLimited, "rate limiting", 1500 * time.Millisecond},
		{"down", errs.Upstream, "The server had an error", 0},
		{"gateway", errs.Upstream, "HTTP 502", 0},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			_, err := g.Complete(context.Background(), OpChat, &Request{Model: "openai/" + tc.model, Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != tc.kind {
				t.Fatalf("err = %v, want kind %s", err, tc.kind)
			}
			if !strings.Contains(e.Message, tc.contains) {
				t.Errorf("message %q does not contain %q", e.Message, tc.contains)
			}
			if strings.Contains(e.Message, "sk-test-secret") || strings.Contains(e.Error(), "sk-test-secret") {
				t.Errorf("the provider key leaked: %q", e.Error())
			}
			if e.RetryAfter != tc.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", e.RetryAfter, tc.retryAfter)
			}
		})
	}
}

// TestDiscoveredEmbeddingModelLearnsItsDimensions checks that a discovered
// embedding model, listed without a vector length, reports the length of
// the vectors it serves at its own size, and keeps it across refreshes.
func TestDiscoveredEmbeddingModelLearnsItsDimensions(t *testing.T) {
	up := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/embeddings": serve(t, "openai/embeddings.json", 200),
		"GET /v1/models":      serve(t, "openai/models.json", 200),
	})
	p := provider("vllm", TypeOpenAI, up.URL+"/v1")
	p.Discover = true
	g, _ := newGateway(t, p)
	ctx := context.Background()
	if err := g.Catalog.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	dims := func() int {
		t.Helper()
		m, err := g.Catalog.Lookup("vllm/text-embedding-3-small")
		if err != nil || !m.Discovered || !m.Has(CapEmbeddings) {
			t.Fatalf("discovered embedding model %+v, %v", m, err)
		}
		return m.EmbeddingDimensions()
	}
	steps := []struct {
		name string
		do   func() error
		want int
	}{
		{"unknown before the first embedding", func() error { return nil }, 0},
		{"an embedding at a requested size teaches nothing", func() error {
			_, err := g.Embed(ctx, "vllm/text-embedding-3-small", EmbedRequest{Inputs: []string{"hello", "world"}, Dimensions: ptr(2)}, "input")
			return err
		}, 0},
		{"the first embedding at its own size fills it in", func() error {
			_, err := g.Embed(ctx, "vllm/text-embedding-3-small", EmbedRequest{Inputs: []string{"hello", "world"}, Dimensions: nil}, "input")
			return err
		}, 3},
		{"a discovery refresh keeps it", func() error { return g.Catalog.Refresh(ctx) }, 3},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.do(); err != nil {
				t.Fatal(err)
			}
			if got := dims(); got != st.want {
				t.Fatalf("EmbeddingDimensions() = %d, want %d", got, st.want)
			}
		})
	}
}
