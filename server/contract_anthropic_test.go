package server_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// bodies records the request bodies an upstream received, by path.
type bodies struct {
	mu   sync.Mutex
	last map[string][]byte
}

func (b *bodies) record(r *http.Request) []byte {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil {
		b.last = map[string][]byte{}
	}
	b.last[r.URL.Path] = body
	return body
}

func (b *bodies) get(t *testing.T, path string) map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var v map[string]any
	if err := json.Unmarshal(b.last[path], &v); err != nil {
		t.Fatalf("the upstream received no JSON body at %s: %v", path, err)
	}
	return v
}

// newFakeAnthropic is an Anthropic upstream speaking Anthropic's Messages
// wire format (the fixtures of server/llm/testdata/anthropic).
func newFakeAnthropic(t *testing.T, rec *bodies) *httptest.Server {
	files := map[string][]byte{}
	for _, f := range []string{"message.json", "message_tool_use.json", "stream.txt", "stream_tool_use.txt", "stream_error.txt", "count_tokens.json", "error_429.json"} {
		files[f] = llmFixture(t, "anthropic/"+f)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model  string            `json:"model"`
			Stream bool              `json:"stream"`
			Tools  []json.RawMessage `json:"tools"`
		}
		_ = json.Unmarshal(rec.record(r), &body)
		send := func(name, ct string) {
			w.Header().Set("Content-Type", ct)
			_, _ = w.Write(files[name])
		}
		switch {
		case r.Header.Get("x-api-key") != "sk-ant-upstream":
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		case r.URL.Path == "/v1/messages/count_tokens":
			send("count_tokens.json", "application/json")
		case r.URL.Path != "/v1/messages":
			http.NotFound(w, r)
		case body.Model == "limited":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("retry-after", "9")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write(files["error_429.json"])
		case body.Model == "broken":
			send("stream_error.txt", "text/event-stream")
		case body.Stream && len(body.Tools) > 0:
			send("stream_tool_use.txt", "text/event-stream")
		case body.Stream:
			send("stream.txt", "text/event-stream")
		case len(body.Tools) > 0:
			send("message_tool_use.json", "application/json")
		default:
			send("message.json", "application/json")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// recordingProxy forwards to target, recording request bodies.
func recordingProxy(t *testing.T, target string, rec *bodies) *httptest.Server {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// anthropicEnv starts a server with an OpenAI-compatible provider
// (`openai`, the OpenAI fake behind a recording proxy) and an Anthropic one
// (`anthropic`, the Anthropic fake); both record what they receive.
func anthropicEnv(t *testing.T) (env *servertest.Env, openaiBodies, anthropicBodies *bodies, openaiFake *fakeOpenAI) {
	openaiBodies, anthropicBodies = &bodies{}, &bodies{}
	openaiFake = newFakeOpenAI(t)
	proxy := recordingProxy(t, openaiFake.URL, openaiBodies)
	ant := newFakeAnthropic(t, anthropicBodies)
	t.Setenv("FAKE_ANTHROPIC_KEY", "sk-ant-upstream")
	priced := func(name string, caps ...string) config.Model {
		return config.Model{Name: name, Capabilities: caps, MaxTokens: 128000, Pricing: &config.Pricing{Input: 0.15, Output: 0.60}}
	}
	env = servertest.New(t, func(c *config.Config) {
		c.Providers = []config.Provider{
			{Name: "openai", Type: "openai", BaseURL: proxy.URL + "/v1", Timeout: config.Duration(5 * time.Second),
				Models: []config.Model{priced("gpt-4o-mini", "chat"), priced("limited", "chat"), priced("thinking", "chat"), {Name: "text-embedding-3-small", Capabilities: []string{"embeddings"}, Dimensions: 3}}},
			{Name: "anthropic", Type: "anthropic", BaseURL: ant.URL + "/v1", APIKeyEnv: "FAKE_ANTHROPIC_KEY", Timeout: config.Duration(5 * time.Second),
				Models: []config.Model{priced("claude-3-5-haiku-latest", "chat", "vision"), priced("broken", "chat"), priced("limited", "chat")}},
		}
	})
	return env, openaiBodies, anthropicBodies, openaiFake
}

// anthropicSDK returns Anthropic's official Go SDK pointed at /anthropic
// with key (sent as x-api-key), over a transport that validates every
// exchange against the spec.
func anthropicSDK(t *testing.T, env *servertest.Env, key string) anthropic.Client {
	return anthropic.NewClient(
		option.WithBaseURL(env.URL+"/anthropic"),
		option.WithAPIKey(key),
		option.WithHTTPClient(env.HTTPClient(t)),
		option.WithMaxRetries(0),
	)
}

func TestContractAnthropicSDK(t *testing.T) {
	env, openaiBodies, anthropicBodies, _ := anthropicEnv(t)
	key := createKey(t, env.Client(t), "sdk", []client.Scope{client.ScopeLLM}, nil)
	c := anthropicSDK(t, env, key.Key)
	hi := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))}

	for _, tc := range []struct {
		name, model, text     string
		input, output         int64
		upstreamPath, sysPath string
	}{
		{"an OpenAI-compatible model", "openai/gpt-4o-mini", "Hello! How can I assist you today?", 19, 10, "/v1/chat/completions", "messages.0.content"},
		{"an Anthropic model", "anthropic/claude-3-5-haiku-latest", "Hi! My name is Claude.", 2095, 503, "/v1/messages", "system"},
	} {
		t.Run("messages over "+tc.name, func(t *testing.T) {
			res, err := c.Messages.New(bg, anthropic.MessageNewParams{
				Model: anthropic.Model(tc.model), MaxTokens: 64, Messages: hi,
				System:      []anthropic.TextBlockParam{{Text: "Be brief."}},
				Temperature: anthropic.Float(0.3), StopSequences: []string{"END"},
				Metadata: anthropic.MetadataParam{UserID: anthropic.String("user-7")},
			}, option.WithHeader("anthropic-beta", "prompt-caching-2024-07-31"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Type != "message" || res.Role != "assistant" || res.Model != tc.model || len(res.Content) != 1 || res.Content[0].Type != "text" ||
				res.Content[0].Text != tc.text || res.StopReason != anthropic.StopReasonEndTurn || res.Usage.InputTokens != tc.input ||
				res.Usage.OutputTokens != tc.output || !strings.HasPrefix(res.ID, "msg_") {
				t.Errorf("message %s", res.RawJSON())
			}
			var sent map[string]any
			if tc.upstreamPath == "/v1/messages" {
				sent = anthropicBodies.get(t, tc.upstreamPath)
				if sent["system"] != "Be brief." || sent["max_tokens"] != 64.0 || sent["metadata"].(map[string]any)["user_id"] != "user-7" {
					t.Errorf("Anthropic received %v", sent)
				}
			} else {
				sent = openaiBodies.get(t, tc.upstreamPath)
				msgs := sent["messages"].([]any)
				if msgs[0].(map[string]any)["role"] != "system" || sent["max_tokens"] != 64.0 || sent["user"] != "user-7" || sent["temperature"] != 0.3 {
					t.Errorf("OpenAI received %v", sent)
				}
			}
		})
	}
	t.Run("streaming accumulates to the message", func(t *testing.T) {
		for _, tc := range []struct {
			model, text    string
			input, output  int64
			wantStopReason anthropic.StopReason
		}{
			{"openai/gpt-4o-mini", "Hello! How can I help?", 9, 6, anthropic.StopReasonEndTurn},
			{"anthropic/claude-3-5-haiku-latest", "Hello!", 25, 15, anthropic.StopReasonEndTurn},
		} {
			t.Run(tc.model, func(t *testing.T) {
				stream := c.Messages.NewStreaming(bg, anthropic.MessageNewParams{Model: anthropic.Model(tc.model), MaxTokens: 64, Messages: hi})
				msg := anthropic.Message{}
				events := 0
				for stream.Next() {
					if err := msg.Accumulate(stream.Current()); err != nil {
						t.Fatal(err)
					}
					events++
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				if len(msg.Content) != 1 || msg.Content[0].Text != tc.text || msg.StopReason != tc.wantStopReason ||
					msg.Usage.InputTokens != tc.input || msg.Usage.OutputTokens != tc.output || msg.Model != tc.model || events < 6 {
					t.Errorf("accumulated %s after %d events", msg.RawJSON(), events)
				}
			})
		}
	})
	weather := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name: "get_current_weather", Description: anthropic.String("Get the current weather"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"location": map[string]any{"type": "string"}}, Required: []string{"location"}},
	}}}
	t.Run("tool_use and the tool_result round trip over an OpenAI-compatible model", func(t *testing.T) {
		params := anthropic.MessageNewParams{Model: "openai/gpt-4o-mini", MaxTokens: 256, Tools: weather,
			ToolChoice: anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: anthropic.Bool(true)}},
			Messages:   []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Boston?"))}}
		res, err := c.Messages.New(bg, params)
		if err != nil {
			t.Fatal(err)
		}
		if res.StopReason != anthropic.StopReasonToolUse || len(res.Content) != 1 {
			t.Fatalf("message %s", res.RawJSON())
		}
		use := res.Content[0].AsToolUse()
		var input map[string]string
		if use.ID != "toolu_call_abc123" || use.Name != "get_current_weather" || json.Unmarshal(use.Input, &input) != nil || input["location"] != "Boston, MA" {
			t.Fatalf("tool_use %s", res.Content[0].RawJSON())
		}
		sent := openaiBodies.get(t, "/v1/chat/completions")
		if sent["parallel_tool_calls"] != false || sent["tool_choice"] != "auto" {
			t.Errorf("OpenAI received %v", sent)
		}
		params.Messages = append(params.Messages, res.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, `{"temperature": 22}`, false)))
		if _, err := c.Messages.New(bg, params); err != nil {
			t.Fatal(err)
		}
		msgs := openaiBodies.get(t, "/v1/chat/completions")["messages"].([]any)
		call := msgs[1].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
		result := msgs[2].(map[string]any)
		if call["id"] != "call_abc123" || result["role"] != "tool" || result["tool_call_id"] != "call_abc123" || result["content"] != `{"temperature": 22}` {
			t.Errorf("OpenAI received the conversation %v", msgs)
		}
	})
	t.Run("tool_use streamed from an Anthropic model", func(t *testing.T) {
		stream := c.Messages.NewStreaming(bg, anthropic.MessageNewParams{Model: "anthropic/claude-3-5-haiku-latest", MaxTokens: 256, Tools: weather, Messages: hi})
		msg := anthropic.Message{}
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 2 || msg.Content[0].Text != "Okay, let me check the weather." || msg.StopReason != anthropic.StopReasonToolUse {
			t.Fatalf("accumulated %s", msg.RawJSON())
		}
		use := msg.Content[1].AsToolUse()
		if use.ID != "toolu_01T1x1fJ34qAmk2tNTrN7Up6" || use.Name != "get_weather" || string(use.Input) != `{"location": "San Francisco, CA", "unit": "fahrenheit"}` {
			t.Errorf("tool_use %s", msg.Content[1].RawJSON())
		}
	})
	t.Run("an image block reaches an Anthropic model as base64", func(t *testing.T) {
		png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nfake"))
		_, err := c.Messages.New(bg, anthropic.MessageNewParams{Model: "anthropic/claude-3-5-haiku-latest", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is this?"), anthropic.NewImageBlockBase64("image/png", png))}})
		if err != nil {
			t.Fatal(err)
		}
		content := anthropicBodies.get(t, "/v1/messages")["messages"].([]any)[0].(map[string]any)["content"].([]any)
		img, _ := content[1].(map[string]any)
		src, _ := img["source"].(map[string]any)
		if len(content) != 2 || img["type"] != "image" || src["type"] != "base64" || src["media_type"] != "image/png" || src["data"] != png {
			t.Errorf("Anthropic received %v", content)
		}
	})
	t.Run("count_tokens", func(t *testing.T) {
		for _, tc := range []struct {
			model string
			exact int64
		}{
			{"anthropic/claude-3-5-haiku-latest", 2095}, // Anthropic's own count
			{"openai/gpt-4o-mini", 0},                   // estimated
		} {
			res, err := c.Messages.CountTokens(bg, anthropic.MessageCountTokensParams{Model: anthropic.Model(tc.model), Messages: hi,
				System: anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("Be brief.")}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.exact > 0 && res.InputTokens != tc.exact || res.InputTokens <= 0 {
				t.Errorf("%s: %s", tc.model, res.RawJSON())
			}
		}
	})
	t.Run("models", func(t *testing.T) {
		page, err := c.Models.List(bg, anthropic.ModelListParams{})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, m := range page.Data {
			ids[m.ID] = true
			if m.Type != "model" || m.DisplayName == "" || m.CreatedAt.IsZero() {
				t.Errorf("model %s", m.RawJSON())
			}
		}
		if !ids["openai/gpt-4o-mini"] || !ids["anthropic/claude-3-5-haiku-latest"] || ids["openai/text-embedding-3-small"] || page.HasMore {
			t.Errorf("models %v", ids)
		}
		small, err := c.Models.List(bg, anthropic.ModelListParams{Limit: anthropic.Int(2)})
		if err != nil || len(small.Data) != 2 || !small.HasMore || small.LastID != small.Data[1].ID {
			t.Fatalf("%v %s", err, small.RawJSON())
		}
		all := 0
		for iter := c.Models.ListAutoPaging(bg, anthropic.ModelListParams{Limit: anthropic.Int(2)}); iter.Next(); {
			all++
		}
		if all != len(page.Data) {
			t.Errorf("auto-paging saw %d models, the list has %d", all, len(page.Data))
		}
		m, err := c.Models.Get(bg, "anthropic/claude-3-5-haiku-latest", anthropic.ModelGetParams{}) // the SDK sends anthropic%2Fclaude-...
		if err != nil || m.ID != "anthropic/claude-3-5-haiku-latest" || m.Type != "model" {
			t.Fatalf("%v %+v", err, m)
		}
	})
	t.Run("usage is recorded for the key", func(t *testing.T) {
		if err := env.Server.Usage().Flush(bg); err != nil {
			t.Fatal(err)
		}
		res, err := env.Client(t).GetUsageWithResponse(bg, &client.GetUsageParams{Key: &key.Id})
		if err != nil || res.JSON200 == nil || res.JSON200.Total.PromptTokens == 0 || res.JSON200.Total.CostUsd <= 0 {
			t.Fatalf("usage %v %s", err, res.Body)
		}
	})
}

func TestContractAnthropicErrors(t *testing.T) {
	env, _, _, _ := anthropicEnv(t)
	key := createKey(t, env.Client(t), "sdk", []client.Scope{client.ScopeLLM}, nil).Key
	c := anthropicSDK(t, env, key)
	hi := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))}
	apiErr := func(t *testing.T, err error) *anthropic.Error {
		t.Helper()
		var e *anthropic.Error
		if !errors.As(err, &e) {
			t.Fatalf("want *anthropic.Error, got %v", err)
		}
		return e
	}
	errorOf := func(t *testing.T, e *anthropic.Error) (typ, msg string) {
		t.Helper()
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal([]byte(e.RawJSON()), &body); err != nil || body.Type != "error" || body.RequestID == "" {
			t.Fatalf("error body %s", e.RawJSON())
		}
		return body.Error.Type, body.Error.Message
	}

	for _, tc := range []struct {
		name   string
		params anthropic.MessageNewParams
		key    string
		status int
		typ    string
		in     string
	}{
		{"unknown model", anthropic.MessageNewParams{Model: "openai/gpt-9", MaxTokens: 10, Messages: hi}, key, 404, "not_found_error", "gpt-9"},
		{"bad key", anthropic.MessageNewParams{Model: "openai/gpt-4o-mini", MaxTokens: 10, Messages: hi}, "sb_not_a_real_key_00000000000000000000000000000000", 401, "authentication_error", ""},
		{"top_k is not carried", anthropic.MessageNewParams{Model: "openai/gpt-4o-mini", MaxTokens: 10, Messages: hi, TopK: anthropic.Int(5)}, key, 400, "invalid_request_error", "top_k"},
		{"a field the provider cannot carry, named as sent", anthropic.MessageNewParams{Model: "anthropic/claude-3-5-haiku-latest", MaxTokens: 500, Messages: hi,
			Thinking: anthropic.ThinkingConfigParamOfEnabled(2048)}, key, 400, "invalid_request_error", "thinking"},
		{"upstream rate limit", anthropic.MessageNewParams{Model: "anthropic/limited", MaxTokens: 10, Messages: hi}, key, 429, "rate_limit_error", "Number of request tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sdk := anthropicSDK(t, env, tc.key)
			_, err := sdk.Messages.New(bg, tc.params)
			e := apiErr(t, err)
			typ, msg := errorOf(t, e)
			if e.StatusCode != tc.status || typ != tc.typ || !strings.Contains(msg, tc.in) {
				t.Errorf("%d %s", e.StatusCode, e.RawJSON())
			}
			if tc.status == 429 && e.Response.Header.Get("Retry-After") != "9" {
				t.Errorf("Retry-After %q", e.Response.Header.Get("Retry-After"))
			}
		})
	}
	t.Run("missing scope", func(t *testing.T) {
		other := createKey(t, env.Client(t), "no-llm", []client.Scope{client.ScopeInvoke}, nil).Key
		noLLM := anthropicSDK(t, env, other)
		_, err := noLLM.Models.List(bg, anthropic.ModelListParams{})
		if e := apiErr(t, err); e.StatusCode != 403 || e.Type() != "permission_error" {
			t.Errorf("%d %s", e.StatusCode, e.RawJSON())
		}
	})
	t.Run("a failure mid-stream is an error event", func(t *testing.T) {
		stream := c.Messages.NewStreaming(bg, anthropic.MessageNewParams{Model: "anthropic/broken", MaxTokens: 10, Messages: hi})
		var text strings.Builder
		for stream.Next() {
			if ev := stream.Current(); ev.Type == "content_block_delta" {
				text.WriteString(ev.Delta.Text)
			}
		}
		if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "Overloaded") || text.String() != "Partial" {
			t.Errorf("err %v after %q", err, text.String())
		}
	})

	raw := env.HTTPClient(t)
	loose := env.HTTPClient(t, servertest.AllowInvalidRequests())
	post := func(t *testing.T, hc *http.Client, path, body string, header ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, env.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	const model = `"model":"openai/gpt-4o-mini","max_tokens":16,`
	const user = `"messages":[{"role":"user","content":"Hi"}]`
	for _, tc := range []struct {
		name, body string
		status     int
		in         string
	}{
		{"max_tokens is required", `{"model":"openai/gpt-4o-mini",` + user + `}`, 400, "max_tokens"},
		{"max_tokens above the model's limit", `{"model":"openai/gpt-4o-mini","max_tokens":999999,` + user + `}`, 400, "max_tokens: must be at most 128000"},
		{"an undeclared name is refused", `{` + model + user + `,"colour":"red"}`, 400, "colour"},
		{"an undeclared name in a block is refused", `{` + model + `"messages":[{"role":"user","content":[{"type":"text","text":"Hi","colour":"red"}]}]}`, 400, "colour"},
		{"container", `{` + model + user + `,"container":"c_1"}`, 400, "container"},
		{"mcp_servers", `{` + model + user + `,"mcp_servers":[{"type":"url","url":"https://x","name":"x"}]}`, 400, "mcp_servers"},
		{"service_tier priority", `{` + model + user + `,"service_tier":"priority"}`, 400, "service_tier"},
		{"a server tool", `{` + model + user + `,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, 400, "tools.0.type"},
		{"a thinking block", `{` + model + `"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"}]}]}`, 400, "messages.1.content.0"},
		{"adaptive thinking", `{` + model + user + `,"thinking":{"type":"adaptive"}}`, 400, "thinking.type"},
		{"an http image URL", `{` + model + `"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"http://x/y.png"}}]}]}`, 400, "messages.0.content.0.source.url"},
		{"an image in a tool result", `{` + model + `"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}]}`, 400, "messages.2.content.0.content.0"},
		{"a role Anthropic does not have", `{` + model + `"messages":[{"role":"system","content":"Hi"}]}`, 400, "messages.0.role"},
		{"service_tier standard_only and cache_control are accepted", `{` + model + user + `,"service_tier":"standard_only","cache_control":{"type":"ephemeral"}}`, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, loose, "/anthropic/v1/messages", tc.body, "x-api-key", key, "anthropic-version", "2023-06-01")
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			_ = json.Unmarshal(b, &body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.status == 200 {
				return
			}
			if body.Type != "error" || body.Error.Type != "invalid_request_error" || !strings.Contains(body.Error.Message, tc.in) {
				t.Errorf("error %s", b)
			}
		})
	}
	t.Run("Bearer works too; x-api-key only on /anthropic/", func(t *testing.T) {
		if resp, b := post(t, raw, "/anthropic/v1/messages", `{`+model+user+`}`, "Authorization", "Bearer "+key); resp.StatusCode != 200 {
			t.Errorf("Bearer: %d %s", resp.StatusCode, b)
		}
		resp, b := post(t, loose, "/openai/v1/chat/completions", `{"model":"openai/gpt-4o-mini",`+user+`}`, "x-api-key", key)
		if resp.StatusCode != 401 {
			t.Errorf("x-api-key on /openai: %d %s", resp.StatusCode, b)
		}
		resp, b = post(t, loose, "/anthropic/v1/messages", `{`+model+user+`}`)
		if resp.StatusCode != 401 || !strings.Contains(string(b), "x-api-key") || !strings.Contains(string(b), "authentication_error") {
			t.Errorf("no credential: %d %s", resp.StatusCode, b)
		}
	})
	t.Run("the exact event sequence, with pings while the model is silent", func(t *testing.T) {
		env.Server.LLM().KeepAlive = 50 * time.Millisecond
		defer func() { env.Server.LLM().KeepAlive = 0 }()
		req, _ := http.NewRequest(http.MethodPost, env.URL+"/anthropic/v1/messages", strings.NewReader(`{"model":"openai/thinking","max_tokens":16,"stream":true,`+user+`}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", key)
		resp, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var names []string
		var last string
		for _, ev := range readSSE(t, resp.Body) {
			if ev.name != last || ev.name != "content_block_delta" {
				names = append(names, ev.name)
			}
			last = ev.name
			var typed struct{ Type string }
			if json.Unmarshal([]byte(ev.data), &typed) != nil || typed.Type != ev.name {
				t.Errorf("event %s has data %s", ev.name, ev.data)
			}
			if ev.name == "message_delta" && !strings.Contains(ev.data, `"usage":{"output_tokens":6,"input_tokens":9`) {
				t.Errorf("message_delta %s", ev.data)
			}
		}
		got := strings.Join(names, " ")
		want := "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"
		if !strings.HasPrefix(got, "ping ") || strings.TrimLeft(strings.ReplaceAll(got, "ping ", ""), " ") != want {
			t.Errorf("events %s", got)
		}
	})
}
