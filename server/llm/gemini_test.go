package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

func geminiFake(t *testing.T) *fake {
	return newFake(t, map[string]http.HandlerFunc{
		"POST /v1beta/models/gemini-2.0-flash:generateContent": func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Tools []any `json:"tools"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			if len(body.Tools) > 0 {
				serve(t, "gemini/generate_function_call.json", 200)(w, r)
				return
			}
			serve(t, "gemini/generate.json", 200)(w, r)
		},
		"POST /v1beta/models/gemini-2.0-flash:streamGenerateContent": serveStream(t, "gemini/stream.txt"),
		"POST /v1beta/models/broken:streamGenerateContent":           serveStream(t, "gemini/stream_error.txt"),
		"POST /v1beta/models/limited:generateContent":                serve(t, "gemini/error_429.json", 429),
		"POST /v1beta/models/invalid:generateContent":                serve(t, "gemini/error_400.json", 400),
		"POST /v1beta/models/text-embedding-004:embedContent":        serve(t, "gemini/embed.json", 200),
		"POST /v1beta/models/text-embedding-004:batchEmbedContents":  serve(t, "gemini/batch_embed.json", 200),
		"GET /v1beta/models": serve(t, "gemini/models.json", 200),
	})
}

func geminiGateway(t *testing.T, up *fake) *Gateway {
	p := provider("gemini", TypeGemini, up.URL+"/v1beta", chatModel("gemini-2.0-flash"), chatModel("broken"), chatModel("limited"), chatModel("invalid"),
		config.Model{Name: "text-embedding-004", Capabilities: []string{CapEmbeddings}, Dimensions: 4})
	p.Discover = true
	g, _ := newGateway(t, p)
	return g
}

func TestGeminiTranslatesToolConversation(t *testing.T) {
	up := geminiFake(t)
	g := geminiGateway(t, up)
	res, err := g.Complete(context.Background(), OpCompatChat, toolRequest("gemini/gemini-2.0-flash"))
	if err != nil {
		t.Fatal(err)
	}
	got := up.last(t)
	assertJSON(t, got.Body, fixture(t, "gemini/request_tools.json"))
	if got.Header.Get("x-goog-api-key") != "sk-test-secret-gemini_key" || strings.Contains(got.Query, "key=") {
		t.Errorf("the key goes in x-goog-api-key, never the URL: %v %q", got.Header, got.Query)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "schedule_meeting" {
		t.Fatalf("tool calls %+v", res.ToolCalls)
	}
	assertJSON(t, []byte(res.ToolCalls[0].Arguments), []byte(`{"attendees":["Bob","Alice"],"date":"2025-03-27","time":"10:00","topic":"Q3 planning"}`))
	if res.FinishReason != FinishToolCalls || res.Usage != (Usage{PromptTokens: 111, CompletionTokens: 31}) {
		t.Errorf("result %+v", res)
	}
}

func TestGeminiGenerateStreamEmbed(t *testing.T) {
	up := geminiFake(t)
	g := geminiGateway(t, up)
	ctx := context.Background()

	t.Run("generate", func(t *testing.T) {
		res, err := g.Complete(ctx, OpGenerate, &Request{Model: "gemini/gemini-2.0-flash", Prompt: "Explain AI"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "AI learns patterns from data to make predictions." || res.Usage != (Usage{PromptTokens: 4, CompletionTokens: 9}) || res.FinishReason != FinishStop {
			t.Errorf("result %+v", res)
		}
		assertJSON(t, up.last(t).Body, []byte(`{"contents":[{"role":"user","parts":[{"text":"Explain AI"}]}]}`))
	})
	t.Run("stream over CRLF-delimited SSE", func(t *testing.T) {
		st, err := g.Stream(ctx, OpChat, &Request{Model: "gemini/gemini-2.0-flash", Messages: []Message{{Role: RoleUser, Content: "Opposite of hot?"}}})
		if err != nil {
			t.Fatal(err)
		}
		res, chunks, err := drain(t, st)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "The opposite of hot is cold." || len(chunks) != 3 || res.Usage != (Usage{PromptTokens: 8, CompletionTokens: 8}) || res.FinishReason != FinishStop {
			t.Errorf("result %+v (%d chunks)", res, len(chunks))
		}
		if q := up.last(t).Query; q != "alt=sse" {
			t.Errorf("query %q", q)
		}
	})
	t.Run("error mid-stream", func(t *testing.T) {
		st, err := g.Stream(ctx, OpChat, &Request{Model: "gemini/broken", Messages: []Message{{Role: RoleUser, Content: "x"}}})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = drain(t, st)
		if errs.KindOf(err) != errs.Upstream || !strings.Contains(err.Error(), "overloaded") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("embed one and many", func(t *testing.T) {
		one, err := g.Embed(ctx, "gemini/text-embedding-004", EmbedRequest{Inputs: []string{"hello"}, Dimensions: nil}, "text")
		if err != nil {
			t.Fatal(err)
		}
		if len(one.Vectors) != 1 || one.Vectors[0][0] != float32(0.013168523) || !one.Usage.Estimated || one.Usage.PromptTokens != 1 {
			t.Errorf("one %+v", one)
		}
		assertJSON(t, up.last(t).Body, []byte(`{"content":{"parts":[{"text":"hello"}]}}`))
		many, err := g.Embed(ctx, "gemini/text-embedding-004", EmbedRequest{Inputs: []string{"hello", "world"}, Dimensions: ptr(4)}, "input")
		if err != nil {
			t.Fatal(err)
		}
		if len(many.Vectors) != 2 || many.Vectors[1][3] != float32(-0.0499) {
			t.Errorf("many %+v", many)
		}
		assertJSON(t, up.last(t).Body, []byte(`{"requests":[
			{"model":"models/text-embedding-004","content":{"parts":[{"text":"hello"}]},"outputDimensionality":4},
			{"model":"models/text-embedding-004","content":{"parts":[{"text":"world"}]},"outputDimensionality":4}]}`))
	})
	t.Run("errors", func(t *testing.T) {
		_, err := g.Complete(ctx, OpChat, &Request{Model: "gemini/limited", Messages: []Message{{Role: RoleUser, Content: "x"}}})
		if errs.KindOf(err) != errs.RateLimited || !strings.Contains(err.Error(), "Resource has been exhausted") {
			t.Errorf("429: %v", err)
		}
		_, err = g.Complete(ctx, OpChat, &Request{Model: "gemini/invalid", Messages: []Message{{Role: RoleUser, Content: "x"}}})
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.Invalid || !strings.Contains(e.Message, "max_output_tokens must be positive") {
			t.Errorf("400: %v", err)
		}
	})
	t.Run("discovery", func(t *testing.T) {
		if err := g.Catalog.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Catalog.Lookup("gemini/imagen-3.0-generate-002"); err == nil {
			t.Error("models without generateContent or embedContent are not chat or embedding models")
		}
		// The configured entries win over discovered ones of the same name.
		m, _ := g.Catalog.Lookup("gemini/gemini-2.0-flash")
		if m.Discovered {
			t.Error("configured model replaced by discovery")
		}
	})
}

func TestGeminiSchemaConversion(t *testing.T) {
	got := geminiSchema(json.RawMessage(`{"$schema":"x","type":"object","additionalProperties":false,"properties":{"n":{"type":["integer","null"],"minimum":1},"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}}},"required":["n"]}`))
	assertJSON(t, got, []byte(`{"type":"OBJECT","properties":{"n":{"type":"INTEGER","nullable":true,"minimum":1},"tags":{"type":"ARRAY","items":{"type":"STRING","enum":["a","b"]}}},"required":["n"]}`))
}
