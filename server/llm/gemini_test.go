package llm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

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

// geminiFieldsGateway serves vision models of Gemini 2.5 and 3 from a fake
// that records every body; "gemini-2.5-flash" answers with two candidates.
func geminiFieldsGateway(t *testing.T) (*Gateway, *fake) {
	up := newFake(t, map[string]http.HandlerFunc{
		"POST /v1beta/models/gemini-2.5-flash:generateContent":       serve(t, "gemini/generate_candidates.json", 200),
		"POST /v1beta/models/gemini-3-pro-preview:generateContent":   serve(t, "gemini/generate.json", 200),
		"POST /v1beta/models/gemini-2.5-flash:streamGenerateContent": serveStream(t, "gemini/stream_candidates.txt"),
	})
	g, _ := newGateway(t, provider("gemini", TypeGemini, up.URL+"/v1beta", visionModel("gemini-2.5-flash"), visionModel("gemini-3-pro-preview")))
	return g, up
}

func TestGeminiRequestFields(t *testing.T) {
	srv := imageHost(t)
	g, up := geminiFieldsGateway(t)
	g.Images = testFetcher(t, srv, time.Second, "127.0.0.1/32")
	pngB64 := base64.StdEncoding.EncodeToString(pngBytes)
	hi := []Message{{Role: RoleUser, Content: "Opposite of hot?"}}
	userHi := `{"role":"user","parts":[{"text":"Opposite of hot?"}]}`
	schema := json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}},"required":["word"],"additionalProperties":false}`)
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{
			name: "data: URL image as inline_data, in order with the text",
			req: Request{Model: "gemini/gemini-2.5-flash", Messages: []Message{{Role: RoleUser, Content: "What is this?\nBe brief.",
				Parts: []Part{{Text: "What is this?"}, imagePart(pngDataURL), {Text: "Be brief."}}}}},
			want: `{"contents":[{"role":"user","parts":[{"text":"What is this?"},{"inline_data":{"mime_type":"image/png","data":"` + pngB64 + `"}},{"text":"Be brief."}]}]}`,
		},
		{
			name: "https image fetched into inline_data",
			req:  Request{Model: "gemini/gemini-2.5-flash", Messages: []Message{{Role: RoleUser, Content: "", Parts: []Part{imagePart(srv.URL + "/cat.png")}}}},
			want: `{"contents":[{"role":"user","parts":[{"inline_data":{"mime_type":"image/png","data":"` + pngB64 + `"}}]}]}`,
		},
		{
			name: "an image with a tool result",
			req: Request{Model: "gemini/gemini-2.5-flash", Messages: []Message{
				{Role: RoleUser, Content: "Draw"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "render", Arguments: `{}`}}},
				{Role: RoleTool, ToolCallID: "c1", Content: "done", Parts: []Part{{Text: "done"}, {Image: &Image{Data: pngBytes, MediaType: "image/png"}}}},
			}, Tools: []Tool{{Name: "render"}}},
			want: `{"contents":[{"role":"user","parts":[{"text":"Draw"}]},{"role":"model","parts":[{"functionCall":{"name":"render","args":{}}}]},
				{"role":"user","parts":[{"functionResponse":{"name":"render","response":{"result":"done"}}},{"inline_data":{"mime_type":"image/png","data":"` + pngB64 + `"}}]}],
				"tools":[{"functionDeclarations":[{"name":"render"}]}]}`,
		},
		{
			name: "json_object",
			req:  Request{Model: "gemini/gemini-2.5-flash", Messages: hi, ResponseFormat: &ResponseFormat{Type: FormatJSONObject}},
			want: `{"contents":[` + userHi + `],"generationConfig":{"responseMimeType":"application/json"}}`,
		},
		{
			name: "json_schema, the schema as JSON Schema",
			req:  Request{Model: "gemini/gemini-2.5-flash", Messages: hi, ResponseFormat: &ResponseFormat{Type: FormatJSONSchema, Name: "answer", Schema: schema}},
			want: `{"contents":[` + userHi + `],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":` + string(schema) + `}}`,
		},
		{
			name: "text format sets nothing",
			req:  Request{Model: "gemini/gemini-2.5-flash", Messages: hi, ResponseFormat: &ResponseFormat{Type: FormatText}},
			want: `{"contents":[` + userHi + `]}`,
		},
		{
			name: "n as candidateCount",
			req:  Request{Model: "gemini/gemini-2.5-flash", Messages: hi, N: 2},
			want: `{"contents":[` + userHi + `],"generationConfig":{"candidateCount":2}}`,
		},
		{
			name: "reasoning effort as a budget before Gemini 3",
			req:  Request{Model: "gemini/gemini-2.5-flash", Messages: hi, ReasoningEffort: EffortMedium},
			want: `{"contents":[` + userHi + `],"generationConfig":{"thinkingConfig":{"thinkingBudget":8192}}}`,
		},
		{
			name: "minimal effort",
			req:  Request{Model: "gemini/gemini-2.5-flash", Messages: hi, ReasoningEffort: EffortMinimal},
			want: `{"contents":[` + userHi + `],"generationConfig":{"thinkingConfig":{"thinkingBudget":512}}}`,
		},
		{
			name: "reasoning effort as a level from Gemini 3",
			req:  Request{Model: "gemini/gemini-3-pro-preview", Messages: hi, ReasoningEffort: EffortLow},
			want: `{"contents":[` + userHi + `],"generationConfig":{"thinkingConfig":{"thinkingLevel":"low"}}}`,
		},
		{
			name: "strict tools with auto choice are VALIDATED",
			req: Request{Model: "gemini/gemini-2.5-flash", Messages: hi, ToolChoice: &ToolChoice{Mode: ToolChoiceAuto},
				Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`), Strict: true}}},
			want: `{"contents":[` + userHi + `],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT"}}]}],"toolConfig":{"functionCallingConfig":{"mode":"VALIDATED"}}}`,
		},
		{
			name: "strict tools with a forced function stay ANY",
			req: Request{Model: "gemini/gemini-2.5-flash", Messages: hi, ToolChoice: &ToolChoice{Mode: ToolChoiceFunction, Name: "f"},
				Tools: []Tool{{Name: "f", Strict: true}}},
			want: `{"contents":[` + userHi + `],"tools":[{"functionDeclarations":[{"name":"f"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}}}`,
		},
		{
			name: "logprobs and top_logprobs",
			req: Request{Model: "gemini/gemini-2.5-flash", Messages: hi,
				Passthrough: map[string]json.RawMessage{"logprobs": json.RawMessage(`true`), "top_logprobs": json.RawMessage(`3`)}},
			want: `{"contents":[` + userHi + `],"generationConfig":{"responseLogprobs":true,"logprobs":3}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			if _, err := g.Complete(context.Background(), OpCompatChat, &r); err != nil {
				t.Fatal(err)
			}
			assertJSON(t, up.last(t).Body, []byte(tc.want))
		})
	}
}

func TestGeminiUnsupportedFields(t *testing.T) {
	g, up := geminiFieldsGateway(t)
	hi := []Message{{Role: RoleUser, Content: "hi"}}
	tests := []struct {
		name  string
		req   Request
		param string
	}{
		{"logit_bias", Request{Messages: hi, Passthrough: map[string]json.RawMessage{"logit_bias": json.RawMessage(`{"1":5}`), "logprobs": json.RawMessage(`true`)}}, "logit_bias"},
		{"service_tier before store", Request{Messages: hi, Passthrough: map[string]json.RawMessage{"store": json.RawMessage(`true`), "service_tier": json.RawMessage(`"flex"`)}}, "service_tier"},
		{"an image in a system message", Request{Messages: []Message{{Role: RoleSystem, Parts: []Part{imagePart(pngDataURL)}}, {Role: RoleUser, Content: "hi"}}}, "messages[0].content[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.requests())
			r := tc.req
			r.Model = "gemini/gemini-2.5-flash"
			_, err := g.Complete(context.Background(), OpCompatChat, &r)
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.Invalid || e.Details["param"] != tc.param || !strings.Contains(e.Message, "provider type gemini") {
				t.Fatalf("err = %v", err)
			}
			if len(up.requests()) != before {
				t.Error("the refused request reached the upstream")
			}
		})
	}
	t.Run("supported fields are not listed", func(t *testing.T) {
		m, _ := g.Catalog.Lookup("gemini/gemini-2.5-flash")
		r := &Request{Messages: hi, N: 3, ReasoningEffort: EffortHigh, ResponseFormat: &ResponseFormat{Type: FormatJSONObject},
			Tools: []Tool{{Name: "f", Strict: true}}, Passthrough: map[string]json.RawMessage{"logprobs": json.RawMessage(`true`), "top_logprobs": json.RawMessage(`2`)}}
		if got := m.provider.(FieldChecker).Unsupported(m, r); len(got) != 0 {
			t.Errorf("unsupported %v", got)
		}
	})
}

func TestGeminiCandidates(t *testing.T) {
	g, _ := geminiFieldsGateway(t)
	m, _ := g.Catalog.Lookup("gemini/gemini-2.5-flash")
	ctx := context.Background()
	r := &Request{Model: m.ID, N: 2, Messages: []Message{{Role: RoleUser, Content: "Opposite of hot?"}}}

	t.Run("every candidate, in index order, with logprobs", func(t *testing.T) {
		resp, err := m.provider.Complete(ctx, m, r)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Text != "The opposite of hot is cold." || resp.FinishReason != FinishLength || resp.ID != "cands-1" ||
			*resp.Usage != (Usage{PromptTokens: 8, CompletionTokens: 14}) {
			t.Errorf("first choice %+v", resp)
		}
		assertJSON(t, resp.Logprobs, []byte(`{"content":[{"token":"The","logprob":-0.01,"bytes":[84,104,101],"top_logprobs":[{"token":"The","logprob":-0.01,"bytes":[84,104,101]}]}],"refusal":null}`))
		if len(resp.More) != 1 || resp.More[0].Text != "Cold." || resp.More[0].FinishReason != FinishStop {
			t.Fatalf("more %+v", resp.More)
		}
		assertJSON(t, resp.More[0].Logprobs, []byte(`{"content":[{"token":"Cold","logprob":-0.2,"bytes":[67,111,108,100],
			"top_logprobs":[{"token":"Cold","logprob":-0.2,"bytes":[67,111,108,100]},{"token":"Cool","logprob":-1.9,"bytes":[67,111,111,108]}]}],"refusal":null}`))
	})
	t.Run("streamed, one chunk per candidate", func(t *testing.T) {
		st, err := m.provider.Stream(ctx, m, r)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var got []Chunk
		for {
			c, err := st.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, c)
		}
		want := []Chunk{
			{Choice: 0, Text: "Hot", Usage: &Usage{PromptTokens: 8}},
			{Choice: 1, Text: "Warm"},
			{Choice: 1, ToolCalls: []ToolCallDelta{{Index: 0, ID: "call_0", Name: "get_weather", Arguments: `{"location":"Paris"}`}}, FinishReason: FinishToolCalls, Usage: &Usage{PromptTokens: 8, CompletionTokens: 9}},
			{Choice: 0, Text: " is cold.", FinishReason: FinishStop},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("chunks\n got %+v\nwant %+v", got, want)
		}
	})
}
