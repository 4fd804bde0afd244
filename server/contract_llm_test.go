package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

// llmFixture reads a provider wire-format fixture of server/llm/testdata.
func llmFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("llm", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeOpenAI is an OpenAI-compatible upstream speaking OpenAI's wire
// format (the fixtures of server/llm/testdata/openai).
type fakeOpenAI struct {
	*httptest.Server
	cancelled chan struct{} // closed when a "slow" stream's request is cancelled
	release   chan struct{} // a "held" stream sends its chunks once this is closed
	requests  atomic.Int32
}

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	f := &fakeOpenAI{cancelled: make(chan struct{}), release: make(chan struct{})}
	chat := llmFixture(t, "openai/chat_completion.json")
	tools := llmFixture(t, "openai/chat_completion_tool_calls.json")
	stream := llmFixture(t, "openai/chat_stream.txt")
	toolStream := llmFixture(t, "openai/chat_stream_tool_calls.txt")
	completion := llmFixture(t, "openai/completion.json")
	limited := llmFixture(t, "openai/error_429.json")
	badRequest := llmFixture(t, "openai/error_400.json")
	models := llmFixture(t, "openai/models.json")
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" { // discovery
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(models)
			return
		}
		var body struct {
			Model  string            `json:"model"`
			Stream bool              `json:"stream"`
			Tools  []json.RawMessage `json:"tools"`
			Input  []string          `json:"input"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case body.Model == "limited":
			w.Header().Set("Retry-After", "12")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write(limited)
		case body.Model == "picky":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(badRequest)
		case r.URL.Path == "/v1/embeddings":
			out := map[string]any{"object": "list", "model": body.Model, "usage": map[string]int{"prompt_tokens": 4 * len(body.Input), "total_tokens": 4 * len(body.Input)}}
			var data []map[string]any
			for i := range body.Input {
				data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": []float64{0.5, -0.25, float64(i)}})
			}
			out["data"] = data
			_ = json.NewEncoder(w).Encode(out)
		case r.URL.Path == "/v1/completions":
			_, _ = w.Write(completion)
		case body.Stream && body.Model == "thinking":
			// Headers at once, then a long silence before the first token,
			// as providers do while a reasoning model thinks.
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond)
			_, _ = w.Write(stream)
		case body.Stream && body.Model == "held":
			// Headers at once, then nothing until the test releases it.
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-f.release:
				_, _ = w.Write(stream)
			case <-r.Context().Done():
			}
		case body.Stream && body.Model == "slow":
			w.Header().Set("Content-Type", "text/event-stream")
			fl := w.(http.Flusher)
			for i := 0; ; i++ {
				fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tick%d \"}}]}\n\n", i)
				fl.Flush()
				select {
				case <-r.Context().Done():
					close(f.cancelled)
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		case body.Stream:
			w.Header().Set("Content-Type", "text/event-stream")
			if len(body.Tools) > 0 {
				_, _ = w.Write(toolStream)
			} else {
				_, _ = w.Write(stream)
			}
		case len(body.Tools) > 0:
			_, _ = w.Write(tools)
		default:
			_, _ = w.Write(chat)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// llmEnv starts a server whose `openai` provider is the fake.
func llmEnv(t *testing.T) (*servertest.Env, *fakeOpenAI) {
	up := newFakeOpenAI(t)
	model := func(name string, caps ...string) config.Model {
		return config.Model{Name: name, Capabilities: caps, MaxTokens: 128000, Pricing: &config.Pricing{Input: 0.15, Output: 0.60}}
	}
	instruct := model("gpt-3.5-turbo-instruct", "completion")
	instruct.MaxTokens = 4096
	env := servertest.New(t, func(c *config.Config) {
		c.Providers = []config.Provider{{
			Name: "openai", Type: "openai", BaseURL: up.URL + "/v1", Timeout: config.Duration(5 * time.Second),
			Models: []config.Model{model("gpt-4o-mini", "chat", "code"), model("limited", "chat"), model("picky", "chat"), model("slow", "chat"), model("thinking", "chat"), model("held", "chat"),
				instruct, {Name: "text-embedding-3-small", Capabilities: []string{"embeddings"}, Dimensions: 3}},
		}}
	})
	return env, up
}

func TestContractLLMNative(t *testing.T) {
	env, _ := llmEnv(t)
	c := env.Client(t)
	msgs := []client.Message{{Role: client.MessageRoleSystem, Content: "Be brief."}, {Role: client.MessageRoleUser, Content: "Hi"}}

	t.Run("generate", func(t *testing.T) {
		res, err := c.GenerateWithResponse(bg, client.GenerateRequest{Model: "openai/gpt-3.5-turbo-instruct", Prompt: "Say this is a test", MaxTokens: ptr(7)})
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON200 == nil {
			t.Fatalf("%v %d %s", err, res.StatusCode(), res.Body)
		}
		g := res.JSON200
		if g.Text != "\n\nThis is indeed a test" || g.Model != "openai/gpt-3.5-turbo-instruct" || g.PromptTokens != 5 || g.CompletionTokens != 7 || g.TotalTokens != 12 ||
			!strings.HasPrefix(g.Id, "gen_") || time.Since(g.CreatedAt) > time.Minute || g.CreatedAt.Location() != time.UTC {
			t.Errorf("generation %+v", g)
		}
	})
	t.Run("chat", func(t *testing.T) {
		res, err := c.ChatWithResponse(bg, client.ChatRequest{Model: "openai/gpt-4o-mini", Messages: msgs, Temperature: ptr(0.5)})
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON200 == nil {
			t.Fatalf("%v %d %s", err, res.StatusCode(), res.Body)
		}
		cc := res.JSON200
		if cc.Message.Role != client.MessageRoleAssistant || cc.Message.Content != "Hello! How can I assist you today?" || cc.TotalTokens != cc.PromptTokens+cc.CompletionTokens || cc.TotalTokens != 29 {
			t.Errorf("chat %+v", cc)
		}
	})
	t.Run("embeddings", func(t *testing.T) {
		res, err := c.CreateEmbeddingWithResponse(bg, client.EmbeddingRequest{Model: "local/hash-embed-384", Text: "offline embeddings"})
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON200 == nil {
			t.Fatalf("%v %d %s", err, res.StatusCode(), res.Body)
		}
		if e := res.JSON200; len(e.Embedding) != 384 || e.Tokens != 2 || e.Model != "local/hash-embed-384" {
			t.Errorf("embedding: %d dims, %d tokens", len(e.Embedding), e.Tokens)
		}
		res, err = c.CreateEmbeddingWithResponse(bg, client.EmbeddingRequest{Model: "openai/text-embedding-3-small", Text: "hosted"})
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON200 == nil || len(res.JSON200.Embedding) != 3 || res.JSON200.Tokens != 4 {
			t.Fatalf("%s", res.Body)
		}
	})
	t.Run("models", func(t *testing.T) {
		res, err := c.ListModelsWithResponse(bg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON200 == nil {
			t.Fatalf("%v %s", err, res.Body)
		}
		byID := map[string]client.Model{}
		for _, m := range res.JSON200.Data {
			byID[m.Id] = m
		}
		if m := byID["local/hash-embed-384"]; m.Dimensions == nil || *m.Dimensions != 384 || m.MaxTokens != nil || m.Provider != "local" || m.Name != "hash-embed-384" {
			t.Errorf("local model %+v", m)
		}
		if m := byID["openai/gpt-4o-mini"]; m.MaxTokens == nil || *m.MaxTokens != 128000 || m.Dimensions != nil {
			t.Errorf("chat model %+v", m)
		}
		if bytes.Contains(res.Body, []byte("pricing")) || bytes.Contains(res.Body, []byte("createdAt")) {
			t.Errorf("the list carries no pricing or createdAt: %s", res.Body)
		}
		emb := client.ListModelsParamsCapability("embeddings")
		res, err = c.ListModelsWithResponse(bg, &client.ListModelsParams{Capability: &emb, Provider: ptr("openai")})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.JSON200.Data) != 1 || res.JSON200.Data[0].Id != "openai/text-embedding-3-small" {
			t.Errorf("filtered %+v", res.JSON200.Data)
		}
		var seen []string
		params := &client.ListModelsParams{Limit: ptr(2)}
		for page := 0; page < 10; page++ {
			res, err = c.ListModelsWithResponse(bg, params)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range res.JSON200.Data {
				seen = append(seen, m.Id)
			}
			if res.JSON200.NextCursor == nil {
				break
			}
			params.Cursor = res.JSON200.NextCursor
		}
		if len(seen) != len(byID) {
			t.Errorf("paging saw %v, the list has %d", seen, len(byID))
		}
	})
	t.Run("one model, both paths", func(t *testing.T) {
		a, err := c.GetProviderModelWithResponse(bg, "openai", "gpt-4o-mini")
		if err != nil {
			t.Fatal(err)
		}
		if a.JSON200 == nil {
			t.Fatalf("%v %s", err, a.Body)
		}
		m := a.JSON200
		if m.Pricing == nil || m.Pricing.Input != 0.15 || m.Pricing.Output != 0.60 || m.CreatedAt.IsZero() || *m.MaxTokens != 128000 {
			t.Errorf("model %+v", m)
		}
		b, err := c.GetModelWithResponse(bg, "openai/gpt-4o-mini") // sent as openai%2Fgpt-4o-mini
		if err != nil {
			t.Fatal(err)
		}
		if b.JSON200 == nil || b.JSON200.Id != "openai/gpt-4o-mini" || !b.JSON200.CreatedAt.Equal(m.CreatedAt) {
			t.Fatalf("%s", b.Body)
		}
		if !strings.Contains(b.HTTPResponse.Request.URL.RawPath+b.HTTPResponse.Request.URL.Opaque, "%2F") && !strings.Contains(b.HTTPResponse.Request.URL.String(), "%2F") {
			t.Errorf("the id was not sent %%2F-encoded: %s", b.HTTPResponse.Request.URL)
		}
		raw := env.HTTPClient(t, servertest.WithKey(env.AdminKey))
		resp, err := raw.Get(env.URL + "/v1/models/local%2Fhash-embed-384")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", err, resp)
		}
		var d client.ModelDetail
		_ = json.NewDecoder(resp.Body).Decode(&d)
		resp.Body.Close()
		if d.Pricing == nil || d.Pricing.Input != 0 || *d.Dimensions != 384 {
			t.Errorf("local detail %+v", d)
		}
	})
	t.Run("function calling", func(t *testing.T) {
		params := map[string]any{"type": "object", "properties": map[string]any{
			"location": map[string]any{"type": "string", "description": "City and state"},
			"unit":     map[string]any{"type": "string", "enum": []string{"celsius", "fahrenheit"}},
		}, "required": []string{"location"}}
		res, err := c.CallFunctionWithResponse(bg, client.FunctionCallingRequest{
			Model: "openai/gpt-4o-mini", Messages: []client.Message{{Role: client.MessageRoleUser, Content: "Weather in Boston?"}},
			Functions: []client.FunctionDefinition{{Name: "get_current_weather", Description: ptr("Current weather"), Parameters: &params}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON200 == nil {
			t.Fatalf("%v %s", err, res.Body)
		}
		r := res.JSON200
		if r.FunctionCall == nil || r.FunctionCall.Name != "get_current_weather" || r.FunctionCall.Arguments["location"] != "Boston, MA" ||
			r.ArgumentsValid == nil || !*r.ArgumentsValid || len(r.ArgumentsProblems) != 0 || r.Message != nil || r.TotalTokens != 99 {
			t.Errorf("result %s", res.Body)
		}
		// The model called a function the caller did not declare.
		res, err = c.CallFunctionWithResponse(bg, client.FunctionCallingRequest{
			Model: "openai/gpt-4o-mini", Messages: []client.Message{{Role: client.MessageRoleUser, Content: "Weather in Boston?"}},
			Functions: []client.FunctionDefinition{{Name: "get_time"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON200 == nil {
			t.Fatalf("%v %s", err, res.Body)
		}
		if r := res.JSON200; r.ArgumentsValid == nil || *r.ArgumentsValid || len(r.ArgumentsProblems) == 0 || r.ArgumentsProblems[0].Field != "functionCall.name" {
			t.Errorf("undeclared function passed: %s", res.Body)
		}
	})
}

func TestContractLLMErrors(t *testing.T) {
	env, _ := llmEnv(t)
	c := env.Client(t)
	loose := env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())
	hi := []client.Message{{Role: client.MessageRoleUser, Content: "Hi"}}

	post := func(t *testing.T, h *http.Client, path, body string) (*http.Response, map[string]any) {
		t.Helper()
		resp, err := h.Post(env.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp, out
	}
	t.Run("unknown model 404", func(t *testing.T) {
		res, err := c.ChatWithResponse(bg, client.ChatRequest{Model: "openai/gpt-9", Messages: hi})
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != 404 || res.JSON404 == nil || res.JSON404.Error.Code != "not_found" {
			t.Errorf("%d %s", res.StatusCode(), res.Body)
		}
	})
	t.Run("model list filters", func(t *testing.T) {
		tests := []struct {
			name, query string
			status      int
			want        []string // ids, or message fragments of the error
		}{
			{"an unknown capability is a 400 listing the capabilities", "?capability=bogus", 400,
				[]string{`unknown capability \"bogus\"`, "chat, code, reasoning, vision, embeddings, completion"}},
			{"an unknown provider is an empty list", "?provider=nope", 200, nil},
			{"provider and capability", "?provider=openai&capability=embeddings", 200, []string{"openai/text-embedding-3-small"}},
			{"an unknown capability fails even with a provider that has no models", "?provider=nope&capability=Chat", 400, []string{`unknown capability \"Chat\"`}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				resp, err := loose.Get(env.URL + "/v1/models" + tt.query)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tt.status {
					t.Fatalf("%d %s, want %d", resp.StatusCode, body, tt.status)
				}
				if tt.status != 200 {
					if !bytes.Contains(body, []byte(`"code":"invalid_request"`)) {
						t.Fatalf("%s, want invalid_request", body)
					}
					for _, w := range tt.want {
						if !bytes.Contains(body, []byte(w)) {
							t.Fatalf("%s does not contain %s", body, w)
						}
					}
					return
				}
				var list struct{ Data []struct{ Id string } }
				if err := json.Unmarshal(body, &list); err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, m := range list.Data {
					ids = append(ids, m.Id)
				}
				if fmt.Sprint(ids) != fmt.Sprint(tt.want) {
					t.Fatalf("ids %v, want %v", ids, tt.want)
				}
			})
		}
	})
	t.Run("missing capability 400", func(t *testing.T) {
		res, err := c.ChatWithResponse(bg, client.ChatRequest{Model: "local/hash-embed-384", Messages: hi})
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != 400 {
			t.Errorf("%d %s", res.StatusCode(), res.Body)
		}
		e, err := c.CreateEmbeddingWithResponse(bg, client.EmbeddingRequest{Model: "openai/gpt-4o-mini", Text: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if e.StatusCode() != 400 {
			t.Errorf("%d %s", e.StatusCode(), e.Body)
		}
	})
	t.Run("every out-of-range knob listed", func(t *testing.T) {
		resp, body := post(t, loose, "/v1/chat", `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],
			"temperature":2.5,"topP":1.1,"frequencyPenalty":-3,"presencePenalty":9,"maxTokens":200000}`)
		if resp.StatusCode != 422 {
			t.Fatalf("status %d %v", resp.StatusCode, body)
		}
		ps := body["error"].(map[string]any)["details"].(map[string]any)["problems"].([]any)
		fields := map[string]bool{}
		for _, p := range ps {
			fields[p.(map[string]any)["field"].(string)] = true
		}
		for _, f := range []string{"temperature", "topP", "frequencyPenalty", "presencePenalty", "maxTokens"} {
			if !fields[f] {
				t.Errorf("no problem for %s: %v", f, ps)
			}
		}
	})
	t.Run("upstream 429 keeps its Retry-After", func(t *testing.T) {
		res, err := c.ChatWithResponse(bg, client.ChatRequest{Model: "openai/limited", Messages: hi})
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != 429 || res.HTTPResponse.Header.Get("Retry-After") != "12" || res.JSON429.Error.Code != "rate_limited" {
			t.Errorf("%d %v %s", res.StatusCode(), res.HTTPResponse.Header, res.Body)
		}
	})
	t.Run("upstream 400 passes its message", func(t *testing.T) {
		res, err := c.GenerateWithResponse(bg, client.GenerateRequest{Model: "openai/picky", Prompt: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != 400 || !strings.Contains(res.JSON400.Error.Message, "max_tokens is too large") {
			t.Errorf("%d %s", res.StatusCode(), res.Body)
		}
	})
	t.Run("auth", func(t *testing.T) {
		res, err := env.ClientWithKey(t, "").ListModelsWithResponse(bg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != 401 {
			t.Errorf("no key: %d", res.StatusCode())
		}
		k := createKey(t, c, "connectors-only", []client.Scope{client.ScopeConnectorsRead}, nil)
		res, err = env.ClientWithKey(t, k.Key).ListModelsWithResponse(bg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != 403 {
			t.Errorf("without llm scope: %d", res.StatusCode())
		}
	})
	t.Run("unknown field", func(t *testing.T) {
		resp, body := post(t, loose, "/v1/generate", `{"model":"openai/gpt-4o-mini","prompt":"x","temprature":1}`)
		if resp.StatusCode != 400 || !strings.Contains(fmt.Sprint(body), "temprature") {
			t.Errorf("%d %v", resp.StatusCode, body)
		}
	})
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	name string
	data string
}

func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var (
		out []sseEvent
		cur sseEvent
	)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

func TestContractLLMStreaming(t *testing.T) {
	env, up := llmEnv(t)
	h := env.HTTPClient(t, servertest.WithKey(env.AdminKey))

	t.Run("chat stream: deltas then done with usage", func(t *testing.T) {
		resp, err := h.Post(env.URL+"/v1/chat", "application/json", strings.NewReader(`{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		events := readSSE(t, resp.Body)
		var text strings.Builder
		for _, ev := range events[:len(events)-1] {
			var d struct{ Text string }
			if ev.name != "delta" || json.Unmarshal([]byte(ev.data), &d) != nil {
				t.Fatalf("event %+v", ev)
			}
			text.WriteString(d.Text)
		}
		last := events[len(events)-1]
		var done client.ChatCompletion
		if last.name != "done" || json.Unmarshal([]byte(last.data), &done) != nil {
			t.Fatalf("last event %+v", last)
		}
		if text.String() != "Hello! How can I help?" || done.Message.Content != text.String() || done.PromptTokens != 9 || done.CompletionTokens != 6 || done.TotalTokens != 15 {
			t.Errorf("text %q done %+v", text.String(), done)
		}
	})
	t.Run("generate stream", func(t *testing.T) {
		resp, err := h.Post(env.URL+"/v1/generate", "application/json", strings.NewReader(`{"model":"openai/gpt-4o-mini","prompt":"Hi","stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		events := readSSE(t, resp.Body)
		var done client.Generation
		if last := events[len(events)-1]; last.name != "done" || json.Unmarshal([]byte(last.data), &done) != nil || done.Text != "Hello! How can I help?" || done.TotalTokens != 15 {
			t.Errorf("events %+v", events)
		}
	})
	t.Run("errors before the stream starts are plain errors", func(t *testing.T) {
		resp, err := h.Post(env.URL+"/v1/chat", "application/json", strings.NewReader(`{"model":"openai/limited","messages":[{"role":"user","content":"Hi"}],"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "12" {
			t.Errorf("%d %v", resp.StatusCode, resp.Header)
		}
	})
	t.Run("keep-alive comments while the model is silent", func(t *testing.T) {
		env.Server.LLM().KeepAlive = 50 * time.Millisecond
		defer func() { env.Server.LLM().KeepAlive = 0 }()
		for _, path := range []string{"/v1/chat", "/openai/v1/chat/completions"} {
			resp, err := h.Post(env.URL+path, "application/json", strings.NewReader(`{"model":"openai/thinking","messages":[{"role":"user","content":"Hi"}],"stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if n := strings.Count(string(raw), ": keep-alive\n\n"); n < 2 {
				t.Errorf("%s: %d keep-alives while waiting 300 ms at a 50 ms interval:\n%s", path, n, raw)
			}
			if !strings.Contains(string(raw), "Hello") {
				t.Errorf("%s: the stream did not go on after the keep-alives:\n%s", path, raw)
			}
		}
	})
	t.Run("the headers and the first event do not wait for the first token", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.URL+"/openai/v1/chat/completions",
			strings.NewReader(`{"model":"openai/held","messages":[{"role":"user","content":"Hi"}],"stream":true}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.Do(req) // the upstream sends nothing until released
		if err != nil {
			t.Fatalf("no headers while the upstream was silent: %v", err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		first, err := br.ReadString('\n')
		if err != nil || !strings.Contains(first, `"delta":{"role":"assistant","content":""}`) {
			t.Fatalf("first event %q, %v", first, err)
		}
		close(up.release)
		rest, err := io.ReadAll(br)
		if err != nil || !strings.Contains(string(rest), "Hello") || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
			t.Errorf("after the release: %q, %v", rest, err)
		}
	})
	t.Run("the events of one upstream chunk leave in one write", func(t *testing.T) {
		// The upstream sends three chunks with text: each route writes the
		// events of each (with the headers and the opening events before
		// the first), then its closing events, with the end of the body.
		var writes atomic.Int32
		hs := httptest.NewUnstartedServer(env.Server)
		hs.Listener = countingListener{hs.Listener, &writes}
		hs.Start()
		defer hs.Close()
		for _, c := range []struct{ path, body string }{
			{"/openai/v1/chat/completions", `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}}`},
			{"/openai/v1/responses", `{"model":"openai/gpt-4o-mini","input":"Hi","stream":true,"store":false}`},
			{"/anthropic/v1/messages", `{"model":"openai/gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"Hi"}],"stream":true}`},
			{"/v1/chat", `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],"stream":true}`},
		} {
			before := writes.Load()
			req, _ := http.NewRequest(http.MethodPost, hs.URL+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+env.AdminKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(raw), "How can I help?") {
				t.Fatalf("%s: %d %s", c.path, resp.StatusCode, raw)
			}
			if n := writes.Load() - before; n != 4 {
				t.Errorf("%s: %d writes for three chunks with text, want 4:\n%s", c.path, n, raw)
			}
		}
	})
	t.Run("client disconnect cancels the upstream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.URL+"/v1/chat", strings.NewReader(`{"model":"openai/slow","messages":[{"role":"user","content":"count"}],"stream":true}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for i := 0; i < 4; i++ { // a couple of events arrived
			if _, err := br.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		resp.Body.Close()
		select {
		case <-up.cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("the upstream request was not cancelled after the client went away")
		}
	})
}

// countingListener counts the writes to the connections it accepts.
type countingListener struct {
	net.Listener
	writes *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.writes}, nil
}

// countingConn counts its writes in writes.
type countingConn struct {
	net.Conn
	writes *atomic.Int32
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

func TestContractLLMUsagePerKey(t *testing.T) {
	env, _ := llmEnv(t)
	admin := env.Client(t)
	a := createKey(t, admin, "team-a", []client.Scope{client.ScopeLLM}, nil)
	b := createKey(t, admin, "team-b", []client.Scope{client.ScopeLLM}, nil)
	for i := 0; i < 3; i++ {
		res, err := env.ClientWithKey(t, a.Key).ChatWithResponse(bg, client.ChatRequest{Model: "openai/gpt-4o-mini", Messages: []client.Message{{Role: client.MessageRoleUser, Content: "Hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != 200 {
			t.Fatalf("%d %s", res.StatusCode(), res.Body)
		}
	}
	res, err := env.ClientWithKey(t, b.Key).CreateEmbeddingWithResponse(bg, client.EmbeddingRequest{Model: "local/hash-embed-384", Text: "one two three"})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != 200 {
		t.Fatalf("%d %s", res.StatusCode(), res.Body)
	}
	rec := env.Server.Usage()
	if err := rec.Flush(bg); err != nil {
		t.Fatal(err)
	}
	rows, err := rec.Query(bg, usage.Query{GroupBy: []string{usage.GroupKey, usage.GroupModel}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]usage.Row{
		a.Id + " openai/gpt-4o-mini":   {Requests: 3, PromptTokens: 57, CompletionTokens: 30},
		b.Id + " local/hash-embed-384": {Requests: 1, PromptTokens: 3},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		w, ok := want[r.PrincipalID+" "+r.Model]
		if !ok || r.Requests != w.Requests || r.PromptTokens != w.PromptTokens || r.CompletionTokens != w.CompletionTokens {
			t.Errorf("row %+v, want %+v", r, w)
		}
		if r.Model == "openai/gpt-4o-mini" {
			if wantCost := (57*0.15 + 30*0.60) / 1e6; r.CostUSD < wantCost*0.999999 || r.CostUSD > wantCost*1.000001 {
				t.Errorf("cost %v want %v", r.CostUSD, wantCost)
			}
		}
	}
}

// TestContractLLMDiscoveredEmbeddingDimensions checks that a discovered
// embedding model, which the provider lists without a vector length, is
// listed without `dimensions` until it serves an embedding, and with the
// length of its vectors from then on.
func TestContractLLMDiscoveredEmbeddingDimensions(t *testing.T) {
	up := newFakeOpenAI(t)
	env := servertest.New(t, func(c *config.Config) {
		c.Providers = []config.Provider{{Name: "vllm", Type: "openai", BaseURL: up.URL + "/v1", Discover: true, Timeout: config.Duration(5 * time.Second)}}
	})
	if err := env.Server.LLM().Catalog.Refresh(bg); err != nil {
		t.Fatal(err)
	}
	c := env.Client(t)
	const id = "vllm/text-embedding-3-small"
	dimensions := func(t *testing.T) *int {
		t.Helper()
		list, err := c.ListModelsWithResponse(bg, &client.ListModelsParams{Provider: ptr("vllm")})
		if err != nil || list.JSON200 == nil {
			t.Fatalf("%v %s", err, list.Body)
		}
		one, err := c.GetModelWithResponse(bg, id)
		if err != nil || one.JSON200 == nil {
			t.Fatalf("%v %s", err, one.Body)
		}
		for _, m := range list.JSON200.Data {
			if m.Id == id {
				a, b := m.Dimensions, one.JSON200.Dimensions
				if (a == nil) != (b == nil) || a != nil && *a != *b {
					t.Fatalf("the list says %v, the model %v", m.Dimensions, one.JSON200.Dimensions)
				}
				return m.Dimensions
			}
		}
		t.Fatalf("%s is not listed: %s", id, list.Body)
		return nil
	}
	if d := dimensions(t); d != nil {
		t.Fatalf("dimensions %d before any embedding, want none", *d)
	}
	res, err := c.CreateEmbeddingWithResponse(bg, client.EmbeddingRequest{Model: id, Text: "hello"})
	if err != nil || res.JSON200 == nil {
		t.Fatalf("%v %s", err, res.Body)
	}
	if d := dimensions(t); d == nil || *d != len(res.JSON200.Embedding) || *d != 3 {
		t.Fatalf("dimensions %v after a %d-dimensional embedding", d, len(res.JSON200.Embedding))
	}
}

// TestContractLLMCostIsExactDecimal checks that GET /v1/usage reports a
// cost as the decimal that prices times tokens make, summed over calls,
// without float noise.
func TestContractLLMCostIsExactDecimal(t *testing.T) {
	env, _ := llmEnv(t)
	c := env.Client(t)
	const calls = 6 // each 19 prompt and 10 completion tokens at $0.15 and $0.60 per million
	for range calls {
		res, err := c.ChatWithResponse(bg, client.ChatRequest{Model: "openai/gpt-4o-mini", Messages: []client.Message{{Role: client.MessageRoleUser, Content: "Hi"}}})
		if err != nil || res.StatusCode() != 200 {
			t.Fatalf("%v %s", err, res.Body)
		}
	}
	h := env.HTTPClient(t, servertest.WithKey(env.AdminKey))
	resp, err := h.Get(env.URL + "/v1/usage")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	// 6 × (19 × 0.15 + 10 × 0.60) / 1e6 = 0.0000531 (summed as floats:
	// 0.000053099999999999996), in the row and the total.
	if n := strings.Count(string(body), `"costUsd":0.0000531,`) + strings.Count(string(body), `"costUsd":0.0000531}`); resp.StatusCode != 200 || n != 2 {
		t.Fatalf("%d %s: want costUsd 0.0000531 in the row and the total", resp.StatusCode, body)
	}
}
