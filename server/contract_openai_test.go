package server_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// sdk returns OpenAI's official Go SDK pointed at /openai/v1 with key,
// over a transport that validates every exchange against the spec.
func sdk(t *testing.T, env *servertest.Env, key string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(env.URL+"/openai/v1/"),
		option.WithAPIKey(key),
		option.WithHTTPClient(env.HTTPClient(t)),
		option.WithMaxRetries(0),
	)
}

func TestContractOpenAISDK(t *testing.T) {
	env, _ := llmEnv(t)
	key := createKey(t, env.Client(t), "sdk", []client.Scope{client.ScopeLLM}, nil).Key
	c := sdk(t, env, key)

	t.Run("chat completion", func(t *testing.T) {
		res, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
			Model:       "openai/gpt-4o-mini",
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hi")},
			MaxTokens:   openai.Int(64),
			Temperature: openai.Float(0.3),
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Object != "chat.completion" || res.Model != "openai/gpt-4o-mini" || len(res.Choices) != 1 ||
			res.Choices[0].Message.Content != "Hello! How can I assist you today?" || res.Choices[0].FinishReason != "stop" ||
			res.Usage.PromptTokens != 19 || res.Usage.CompletionTokens != 10 || res.Usage.TotalTokens != 29 || !strings.HasPrefix(res.ID, "chatcmpl-") {
			t.Errorf("completion %s", res.RawJSON())
		}
	})
	t.Run("bare model name", func(t *testing.T) {
		res, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}})
		if err != nil || res.Model != "openai/gpt-4o-mini" {
			t.Fatalf("%v %v", err, res)
		}
	})
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "get_current_weather",
		Description: openai.String("Get the current weather"),
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{
			"location": map[string]any{"type": "string"},
		}, "required": []string{"location"}},
	})}
	t.Run("tool calls and the tool round trip", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{
			Model:      "openai/gpt-4o-mini",
			Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Boston?")},
			Tools:      tools,
			ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")},
		}
		res, err := c.Chat.Completions.New(bg, params)
		if err != nil {
			t.Fatal(err)
		}
		msg := res.Choices[0].Message
		if res.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_current_weather" || msg.ToolCalls[0].ID != "call_abc123" {
			t.Fatalf("message %s", msg.RawJSON())
		}
		var args map[string]string
		if err := json.Unmarshal([]byte(msg.ToolCalls[0].Function.Arguments), &args); err != nil || args["location"] != "Boston, MA" {
			t.Errorf("arguments %q", msg.ToolCalls[0].Function.Arguments)
		}
		// Send the assistant turn and the tool result back, as SDK users do.
		params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(`{"temperature": 22}`, msg.ToolCalls[0].ID))
		if _, err := c.Chat.Completions.New(bg, params); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("stream with include_usage", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
			Model:         "openai/gpt-4o-mini",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		acc := openai.ChatCompletionAccumulator{}
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Choices[0].Message.Content != "Hello! How can I help?" || acc.Usage.TotalTokens != 15 || acc.Usage.PromptTokens != 9 || chunks < 5 {
			t.Errorf("accumulated %+v usage %+v after %d chunks", acc.Choices[0].Message.Content, acc.Usage, chunks)
		}
	})
	t.Run("streamed tool call", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
			Model: "openai/gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather?")}, Tools: tools,
		})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		tc := acc.Choices[0].Message.ToolCalls
		if len(tc) != 1 || tc[0].Function.Name != "get_weather" || tc[0].Function.Arguments != `{"location":"Paris"}` || acc.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("tool calls %+v finish %q", tc, acc.Choices[0].FinishReason)
		}
	})
	t.Run("legacy completions", func(t *testing.T) {
		res, err := c.Completions.New(bg, openai.CompletionNewParams{
			Model:  "openai/gpt-3.5-turbo-instruct",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Say this is a test")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].Text != "\n\nThis is indeed a test" || res.Choices[0].FinishReason != "length" || res.Usage.TotalTokens != 12 {
			t.Errorf("completion %s", res.RawJSON())
		}
		stream := c.Completions.NewStreaming(bg, openai.CompletionNewParams{
			Model:  "openai/gpt-4o-mini",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Hi")},
		})
		var text strings.Builder
		for stream.Next() {
			if ch := stream.Current(); len(ch.Choices) > 0 {
				text.WriteString(ch.Choices[0].Text)
			}
		}
		if err := stream.Err(); err != nil || text.String() != "Hello! How can I help?" {
			t.Errorf("streamed %q, %v", text.String(), err)
		}
	})
	t.Run("embeddings", func(t *testing.T) {
		res, err := c.Embeddings.New(bg, openai.EmbeddingNewParams{
			Model: "local/hash-embed-384",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first text", "second text"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) != 2 || len(res.Data[1].Embedding) != 384 || res.Data[1].Index != 1 || res.Usage.PromptTokens != 4 || res.Model != "local/hash-embed-384" {
			t.Errorf("embeddings: %d vectors, usage %+v", len(res.Data), res.Usage)
		}
		one, err := c.Embeddings.New(bg, openai.EmbeddingNewParams{
			Model: "openai/text-embedding-3-small",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
		})
		if err != nil || len(one.Data) != 1 || one.Data[0].Embedding[0] != 0.5 {
			t.Fatalf("%v %+v", err, one)
		}
		// base64, as OpenAI's Python and Node SDKs ask by default.
		raw := env.HTTPClient(t, servertest.WithKey(key))
		resp, err := raw.Post(env.URL+"/openai/v1/embeddings", "application/json", strings.NewReader(`{"model":"local/hash-embed-384","input":"first text","encoding_format":"base64"}`))
		if err != nil {
			t.Fatal(err)
		}
		var b64 struct {
			Data []struct{ Embedding string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&b64)
		resp.Body.Close()
		bin, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
		if err != nil || len(bin) != 384*4 {
			t.Fatalf("base64 embedding: %v, %d bytes", err, len(bin))
		}
		if f := math.Float32frombits(binary.LittleEndian.Uint32(bin)); f != float32(res.Data[0].Embedding[0]) {
			t.Errorf("base64 vector differs from the float one: %v vs %v", f, res.Data[0].Embedding[0])
		}
	})
	t.Run("models", func(t *testing.T) {
		page, err := c.Models.List(bg)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]string{}
		for _, m := range page.Data {
			ids[m.ID] = m.OwnedBy
		}
		if ids["local/hash-embed-384"] != "local" || ids["openai/gpt-4o-mini"] != "openai" {
			t.Errorf("models %v", ids)
		}
		m, err := c.Models.Get(bg, "openai/gpt-4o-mini") // the SDK sends openai%2Fgpt-4o-mini
		if err != nil || m.ID != "openai/gpt-4o-mini" || m.Created == 0 {
			t.Fatalf("%v %+v", err, m)
		}
		resp, err := env.HTTPClient(t, servertest.WithKey(key)).Get(env.URL + "/openai/v1/models/openai/gpt-4o-mini")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("unencoded id: %v %v", err, resp)
		}
		resp.Body.Close()
	})
}

func TestContractOpenAIErrors(t *testing.T) {
	env, _ := llmEnv(t)
	key := createKey(t, env.Client(t), "sdk", []client.Scope{client.ScopeLLM}, nil).Key
	c := sdk(t, env, key)
	hi := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}
	apiErr := func(t *testing.T, err error) *openai.Error {
		t.Helper()
		var e *openai.Error
		if !errors.As(err, &e) {
			t.Fatalf("want *openai.Error, got %v", err)
		}
		return e
	}

	t.Run("unknown model", func(t *testing.T) {
		_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "openai/gpt-9", Messages: hi})
		e := apiErr(t, err)
		if e.StatusCode != 404 || e.Code != "model_not_found" || e.Type != "invalid_request_error" || e.Param != "model" {
			t.Errorf("%d %s", e.StatusCode, e.RawJSON())
		}
		_, err = c.Models.Get(bg, "nope/nope")
		if e := apiErr(t, err); e.StatusCode != 404 {
			t.Errorf("%d", e.StatusCode)
		}
	})
	t.Run("invalid parameter is a 400 naming it", func(t *testing.T) {
		_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "openai/gpt-4o-mini", Messages: hi, MaxTokens: openai.Int(999999)})
		e := apiErr(t, err)
		if e.StatusCode != 400 || e.Param != "max_tokens" || e.Type != "invalid_request_error" || !strings.Contains(e.Message, "at most 128000") {
			t.Errorf("%d %s", e.StatusCode, e.RawJSON())
		}
	})
	t.Run("upstream rate limit", func(t *testing.T) {
		_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "openai/limited", Messages: hi})
		e := apiErr(t, err)
		if e.StatusCode != 429 || e.Type != "rate_limit_error" || e.Response.Header.Get("Retry-After") != "12" {
			t.Errorf("%d %s %v", e.StatusCode, e.RawJSON(), e.Response.Header)
		}
	})
	t.Run("bad key", func(t *testing.T) {
		bad := sdk(t, env, "sb_not_a_real_key_00000000000000000000000000000000")
		_, err := bad.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "openai/gpt-4o-mini", Messages: hi})
		e := apiErr(t, err)
		if e.StatusCode != 401 || e.Type != "authentication_error" || e.Code != "invalid_api_key" {
			t.Errorf("%d %s", e.StatusCode, e.RawJSON())
		}
	})
	t.Run("missing scope", func(t *testing.T) {
		other := createKey(t, env.Client(t), "no-llm", []client.Scope{client.ScopeInvoke}, nil).Key
		noLLM := sdk(t, env, other)
		_, err := noLLM.Models.List(bg)
		if e := apiErr(t, err); e.StatusCode != 403 || e.Type != "permission_error" {
			t.Errorf("%d %s", e.StatusCode, e.RawJSON())
		}
	})
	loose := env.HTTPClient(t, servertest.WithKey(key), servertest.AllowInvalidRequests())
	for _, tc := range []struct {
		name, path, body string
		status           int
		param            string
	}{
		{"audio parts", "/openai/v1/chat/completions", `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, 400, "messages[0].content[0].type"},
		{"n<1", "/openai/v1/chat/completions", `{"model":"openai/gpt-4o-mini","n":0,"messages":[{"role":"user","content":"Hi"}]}`, 400, "n"},
		{"audio output", "/openai/v1/chat/completions", `{"model":"openai/gpt-4o-mini","audio":{"voice":"alloy","format":"mp3"},"modalities":["text","audio"],"messages":[{"role":"user","content":"Hi"}]}`, 400, "audio"},
		{"deprecated functions", "/openai/v1/chat/completions", `{"model":"openai/gpt-4o-mini","functions":[{"name":"f"}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "functions"},
		{"unknown role", "/openai/v1/chat/completions", `{"model":"openai/gpt-4o-mini","messages":[{"role":"wizard","content":"Hi"}]}`, 400, "messages[0].role"},
		{"malformed JSON", "/openai/v1/chat/completions", `{"model":`, 400, ""},
		{"a token outside the encoding", "/openai/v1/embeddings", `{"model":"local/hash-embed-384","input":[[9906,999999999]]}`, 400, "input"},
		{"an empty token array", "/openai/v1/embeddings", `{"model":"local/hash-embed-384","input":[[9906],[]]}`, 400, "input[1]"},
		{"bad encoding", "/openai/v1/embeddings", `{"model":"local/hash-embed-384","input":"x","encoding_format":"int8"}`, 400, "encoding_format"},
		{"fields an OpenAI-compatible upstream understands pass through", "/openai/v1/chat/completions", `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],"store":false,"metadata":{"a":"b"},"reasoning_effort":"low"}`, 200, ""},
		{"two prompts", "/openai/v1/completions", `{"model":"openai/gpt-4o-mini","prompt":["a","b"]}`, 400, "prompt"},
		{"a known field in another case is refused", "/openai/v1/chat/completions", `{"model":"openai/gpt-4o-mini","MODEL":"openai/limited","messages":[{"role":"user","content":"Hi"}]}`, 400, "MODEL"},
		{"a duplicate name is refused", "/openai/v1/chat/completions", `{"model":"openai/gpt-4o-mini","model":"openai/limited","messages":[{"role":"user","content":"Hi"}]}`, 400, "model"},
		{"a duplicate nested name is refused", "/openai/v1/chat/completions", `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Hi","role":"system"}]}`, 400, "messages[0].role"},
		{"a duplicate in an ignored field is refused", "/openai/v1/embeddings", `{"model":"local/hash-embed-384","input":"x","metadata":{"a":1,"a":2}}`, 400, "metadata.a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := loose.Post(env.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error *struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%+v)", resp.StatusCode, tc.status, body.Error)
			}
			if tc.status == http.StatusOK {
				return
			}
			if body.Error == nil || body.Error.Type != "invalid_request_error" || body.Error.Message == "" {
				t.Fatalf("error %+v", body.Error)
			}
			if tc.param != "" && (body.Error.Param == nil || *body.Error.Param != tc.param) {
				t.Errorf("param %v, want %s", body.Error.Param, tc.param)
			}
		})
	}
}

// fakeNonOpenAI serves Anthropic's Messages API and Gemini's API from the
// wire-format fixtures of server/llm/testdata.
func fakeNonOpenAI(t *testing.T) *httptest.Server {
	files := map[string][]byte{}
	for _, f := range []string{"anthropic/message_tool_use.json", "anthropic/stream_tool_use.txt", "anthropic/message.json", "anthropic/stream_error.txt",
		"gemini/generate_function_call.json", "gemini/stream.txt", "gemini/embed.json"} {
		files[f] = llmFixture(t, f)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model  string            `json:"model"`
			Stream bool              `json:"stream"`
			Tools  []json.RawMessage `json:"tools"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		send := func(name, ct string) {
			w.Header().Set("Content-Type", ct)
			_, _ = w.Write(files[name])
		}
		switch {
		case r.URL.Path == "/anthropic/v1/messages" && body.Model == "broken":
			send("anthropic/stream_error.txt", "text/event-stream")
		case r.URL.Path == "/anthropic/v1/messages" && body.Stream:
			send("anthropic/stream_tool_use.txt", "text/event-stream")
		case r.URL.Path == "/anthropic/v1/messages" && len(body.Tools) > 0:
			send("anthropic/message_tool_use.json", "application/json")
		case r.URL.Path == "/anthropic/v1/messages":
			send("anthropic/message.json", "application/json")
		case r.URL.Path == "/gemini/v1beta/models/gemini-2.0-flash:generateContent":
			send("gemini/generate_function_call.json", "application/json")
		case r.URL.Path == "/gemini/v1beta/models/gemini-2.0-flash:streamGenerateContent":
			send("gemini/stream.txt", "text/event-stream")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestContractOpenAISDKAcrossProviders(t *testing.T) {
	up := fakeNonOpenAI(t)
	env := servertest.New(t, func(c *config.Config) {
		c.Providers = []config.Provider{
			{Name: "anthropic", Type: "anthropic", BaseURL: up.URL + "/anthropic/v1", Models: []config.Model{{Name: "claude-3-5-haiku-latest", MaxTokens: 200000}, {Name: "broken"}}},
			{Name: "gemini", Type: "gemini", BaseURL: up.URL + "/gemini/v1beta", Models: []config.Model{{Name: "gemini-2.0-flash", MaxTokens: 1048576}}},
		}
	})
	c := sdk(t, env, env.AdminKey)
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:       "get_weather",
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}},
	})}
	ask := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in SF?")}

	t.Run("anthropic tool_use as OpenAI tool_calls", func(t *testing.T) {
		res, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "anthropic/claude-3-5-haiku-latest", Messages: ask, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		ch := res.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].ID != "toolu_01A09q90qw90lq917835lq9" ||
			ch.Message.ToolCalls[0].Function.Arguments != `{"location": "San Francisco, CA", "unit": "celsius"}` || res.Usage.TotalTokens != 480 {
			t.Errorf("%s", res.RawJSON())
		}
	})
	t.Run("anthropic streamed tool_use", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{Model: "anthropic/claude-3-5-haiku-latest", Messages: ask, Tools: tools,
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		tc := acc.Choices[0].Message.ToolCalls
		if len(tc) != 1 || tc[0].Function.Name != "get_weather" || tc[0].Function.Arguments != `{"location": "San Francisco, CA", "unit": "fahrenheit"}` ||
			acc.Choices[0].Message.Content != "Okay, let me check the weather." || acc.Usage.PromptTokens != 472 || acc.Usage.CompletionTokens != 89 {
			t.Errorf("tool calls %+v content %q usage %+v", tc, acc.Choices[0].Message.Content, acc.Usage)
		}
	})
	t.Run("gemini functionCall as OpenAI tool_calls", func(t *testing.T) {
		res, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "gemini/gemini-2.0-flash", Messages: ask, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		tc := res.Choices[0].Message.ToolCalls
		if len(tc) != 1 || tc[0].Function.Name != "schedule_meeting" || tc[0].ID == "" || !strings.Contains(tc[0].Function.Arguments, `"Q3 planning"`) {
			t.Errorf("%s", res.RawJSON())
		}
	})
	t.Run("gemini stream", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{Model: "gemini/gemini-2.0-flash", Messages: ask,
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil || acc.Choices[0].Message.Content != "The opposite of hot is cold." || acc.Usage.TotalTokens != 16 {
			t.Errorf("%v %q %+v", err, acc.Choices[0].Message.Content, acc.Usage)
		}
	})
	t.Run("an upstream error mid-stream reaches the SDK as an error", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{Model: "anthropic/broken", Messages: ask})
		var text strings.Builder
		for stream.Next() {
			if ch := stream.Current(); len(ch.Choices) > 0 {
				text.WriteString(ch.Choices[0].Delta.Content)
			}
		}
		if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "Overloaded") || text.String() != "Partial" {
			t.Errorf("err %v after %q", err, text.String())
		}
	})
	t.Run("and to native stream callers as an error event", func(t *testing.T) {
		resp, err := env.HTTPClient(t, servertest.WithKey(env.AdminKey)).Post(env.URL+"/v1/chat", "application/json",
			strings.NewReader(`{"model":"anthropic/broken","messages":[{"role":"user","content":"Hi"}],"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		events := readSSE(t, resp.Body)
		last := events[len(events)-1]
		var e client.ErrorResponse
		if last.name != "error" || json.Unmarshal([]byte(last.data), &e) != nil || e.Error.Code != "upstream_error" || e.Error.RequestId != resp.Header.Get("X-Request-Id") {
			t.Errorf("events %+v", events)
		}
	})
}
