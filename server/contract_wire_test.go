package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// scriptedOpenAI is an OpenAI-compatible upstream whose answer each test
// sets (a chat completion's content, choices or raw SSE), recording the
// request bodies it receives.
type scriptedOpenAI struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]json.RawMessage
	// answer writes the reply to a request body.
	answer func(w http.ResponseWriter, body map[string]json.RawMessage)
}

func newScriptedOpenAI(t *testing.T) *scriptedOpenAI {
	f := &scriptedOpenAI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		answer := f.answer
		f.mu.Unlock()
		if r.URL.Path == "/v1/embeddings" {
			var in []string
			_ = json.Unmarshal(body["input"], &in)
			data := make([]map[string]any, len(in))
			for i := range in {
				data[i] = map[string]any{"object": "embedding", "index": i, "embedding": []float64{0.5, float64(i)}}
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": "m", "data": data, "usage": map[string]int{"prompt_tokens": 3, "total_tokens": 3}})
			return
		}
		answer(w, body)
	}))
	t.Cleanup(f.Close)
	return f
}

// set makes the upstream answer with answer from now on.
func (f *scriptedOpenAI) set(answer func(w http.ResponseWriter, body map[string]json.RawMessage)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = answer
}

// last is the body of the last request received.
func (f *scriptedOpenAI) last(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) == 0 {
		t.Fatal("the upstream received no request")
	}
	return f.bodies[len(f.bodies)-1]
}

// count is how many requests the upstream received.
func (f *scriptedOpenAI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

// chatReply answers with a chat completion of one choice per content.
func chatReply(contents ...string) func(http.ResponseWriter, map[string]json.RawMessage) {
	return func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		choices := make([]map[string]any, len(contents))
		for i, c := range contents {
			choices[i] = map[string]any{"index": i, "message": map[string]any{"role": "assistant", "content": c}, "finish_reason": "stop",
				"logprobs": map[string]any{"content": []map[string]any{{"token": "x", "logprob": -0.25, "bytes": []int{120}, "top_logprobs": []any{}}}}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-up", "object": "chat.completion", "created": 1, "model": "m",
			"choices": choices, "usage": map[string]int{"prompt_tokens": 10, "completion_tokens": 5 * len(contents), "total_tokens": 10 + 5*len(contents)}})
	}
}

// wireEnv runs a server with an OpenAI-compatible provider (the scripted
// upstream; a chat model and an embedding model), and an Anthropic and a
// Gemini provider whose upstream answers with the fixtures of
// server/llm/testdata; the counter counts the requests it received.
func wireEnv(t *testing.T) (*servertest.Env, *scriptedOpenAI, string, *atomic.Int32) {
	up := newScriptedOpenAI(t)
	var others atomic.Int32
	anthropic, gemini := llmFixture(t, "anthropic/message.json"), llmFixture(t, "gemini/generate.json")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		others.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/messages") {
			_, _ = w.Write(anthropic)
			return
		}
		_, _ = w.Write(gemini)
	}))
	t.Cleanup(other.Close)
	env := servertest.New(t, func(c *config.Config) {
		c.Providers = []config.Provider{
			{Name: "oai", Type: "openai", BaseURL: up.URL + "/v1", Timeout: config.Duration(5 * time.Second), Models: []config.Model{
				{Name: "m", Capabilities: []string{"chat"}, Pricing: &config.Pricing{Input: 1, Output: 2}},
				{Name: "text-embedding-3-small", Capabilities: []string{"embeddings"}},
			}},
			{Name: "anth", Type: "anthropic", BaseURL: other.URL, Timeout: config.Duration(5 * time.Second), Models: []config.Model{{Name: "claude-x", Capabilities: []string{"chat"}}}},
			{Name: "gem", Type: "gemini", BaseURL: other.URL, Timeout: config.Duration(5 * time.Second), Models: []config.Model{{Name: "gemini-x", Capabilities: []string{"chat"}}}},
		}
	})
	key := createKey(t, env.Client(t), "wire", []client.Scope{client.ScopeLLM}, nil).Key
	return env, up, key, &others
}

// openAIPost posts body to path and decodes the answer: the status, the
// Switchboard-Output-Check header and the JSON body.
func openAIPost(t *testing.T, hc *http.Client, url, body string) (int, string, map[string]any) {
	t.Helper()
	resp, err := hc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header.Get("Switchboard-Output-Check"), out
}

const personSchema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0},"tags":{"type":"array","items":{"$ref":"#/$defs/tag"}}},"required":["name","age"],"additionalProperties":false,"$defs":{"tag":{"type":"string","enum":["a","b"]}}}`

func TestContractStructuredOutputs(t *testing.T) {
	env, up, key, _ := wireEnv(t)
	hc := env.HTTPClient(t, servertest.WithKey(key))
	jsonSchema := func(strict bool) string {
		return fmt.Sprintf(`{"type":"json_schema","json_schema":{"name":"person","schema":%s,"strict":%t}}`, personSchema, strict)
	}
	for _, tc := range []struct {
		name, format, output string
		status               int
		check                string // the Switchboard-Output-Check header's start
	}{
		{"json_schema, conforming output", jsonSchema(true), `{"name":"Ada","age":36,"tags":["a"]}`, 200, "valid"},
		{"json_schema, output outside the schema, not strict", jsonSchema(false), `{"name":"Ada","age":-1}`, 200, "invalid; the output does not conform to the schema"},
		{"json_schema, a $ref'd enum broken, not strict", jsonSchema(false), `{"name":"Ada","age":1,"tags":["z"]}`, 200, "invalid; "},
		{"json_schema, output outside the schema, strict", jsonSchema(true), `{"name":"Ada"}`, 502, ""},
		{"json_schema, output not JSON, strict", jsonSchema(true), `Sure! Here is the JSON`, 502, ""},
		{"json_object, an object", `{"type":"json_object"}`, `{"any":"thing"}`, 200, "valid"},
		{"json_object, not an object", `{"type":"json_object"}`, `[1,2]`, 200, "invalid; the output is not a JSON object"},
		{"text", `{"type":"text"}`, `free text`, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up.set(chatReply(tc.output))
			status, check, body := openAIPost(t, hc, env.URL+"/openai/v1/chat/completions",
				`{"model":"oai/m","messages":[{"role":"user","content":"Who?"}],"response_format":`+tc.format+`}`)
			if status != tc.status || !strings.HasPrefix(check, tc.check) || (tc.check == "") != (check == "") {
				t.Fatalf("status %d check %q, want %d %q: %v", status, check, tc.status, tc.check, body)
			}
			// The upstream receives the format as it was sent.
			var sent map[string]any
			_ = json.Unmarshal(up.last(t)["response_format"], &sent)
			var want map[string]any
			if tc.format != `{"type":"text"}` { // text asks for nothing and is not sent
				_ = json.Unmarshal([]byte(tc.format), &want)
			}
			if fmt.Sprint(sent) != fmt.Sprint(want) {
				t.Errorf("upstream response_format %v, want %v", sent, want)
			}
			if status == 502 {
				msg := body["error"].(map[string]any)["message"].(string)
				if !strings.Contains(msg, "does not meet the strict response format") {
					t.Errorf("error %v", body)
				}
			}
		})
	}
	t.Run("an invalid schema is refused before any upstream call", func(t *testing.T) {
		n := up.count()
		status, _, body := openAIPost(t, hc, env.URL+"/openai/v1/chat/completions",
			`{"model":"oai/m","messages":[{"role":"user","content":"Who?"}],"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}}}}`)
		e := body["error"].(map[string]any)
		if status != 400 || e["param"] != "response_format.schema" || !strings.Contains(e["message"].(string), "not a valid JSON Schema") || up.count() != n {
			t.Fatalf("%d %v", status, body)
		}
	})
	t.Run("native /v1/chat and /v1/generate take responseFormat", func(t *testing.T) {
		up.set(chatReply(`{"name":"Ada","age":36}`))
		c := env.Client(t)
		rf := &client.ResponseFormat{Type: client.ResponseFormatJSONSchema, Name: ptr("person"), Strict: ptr(true)}
		schema := json.RawMessage(personSchema)
		rf.Schema = &schema
		res, err := c.ChatWithResponse(bg, client.ChatRequest{Model: "oai/m", Messages: []client.Message{{Role: client.MessageRoleUser, Content: "Who?"}}, ResponseFormat: rf})
		if err != nil || res.JSON200 == nil || res.HTTPResponse.Header.Get("Switchboard-Output-Check") != "valid" {
			t.Fatalf("%v %s", err, res.Body)
		}
		var sent struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
				Strict bool            `json:"strict"`
			} `json:"json_schema"`
		}
		_ = json.Unmarshal(up.last(t)["response_format"], &sent)
		if sent.Type != "json_schema" || sent.JSONSchema.Name != "person" || !sent.JSONSchema.Strict || len(sent.JSONSchema.Schema) == 0 {
			t.Errorf("upstream response_format %+v", sent)
		}
		up.set(chatReply(`not json`))
		gres, err := c.GenerateWithResponse(bg, client.GenerateRequest{Model: "oai/m", Prompt: "Who?", ResponseFormat: &client.ResponseFormat{Type: client.ResponseFormatJSONObject}})
		if err != nil || gres.JSON200 == nil || !strings.HasPrefix(gres.HTTPResponse.Header.Get("Switchboard-Output-Check"), "invalid; the output is not valid JSON") {
			t.Fatalf("%v %s %v", err, gres.Body, gres.HTTPResponse.Header)
		}
		bad, err := c.ChatWithResponse(bg, client.ChatRequest{Model: "oai/m", Messages: []client.Message{{Role: client.MessageRoleUser, Content: "Who?"}},
			ResponseFormat: &client.ResponseFormat{Type: client.ResponseFormatJSONSchema}})
		if err != nil || bad.StatusCode() != 422 || !strings.Contains(string(bad.Body), "responseFormat.name") || !strings.Contains(string(bad.Body), "responseFormat.schema") {
			t.Fatalf("%v %d %s", err, bad.StatusCode(), bad.Body)
		}
	})
	t.Run("a strict stream that breaks the schema ends with an error event", func(t *testing.T) {
		up.set(func(w http.ResponseWriter, _ map[string]json.RawMessage) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"{\"name\":"}}]}`+"\n\n")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"\"Ada\"}"},"finish_reason":"stop"}]}`+"\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
		})
		resp, err := hc.Post(env.URL+"/openai/v1/chat/completions", "application/json", strings.NewReader(
			`{"model":"oai/m","stream":true,"messages":[{"role":"user","content":"Who?"}],"response_format":`+jsonSchema(true)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		events := strings.Split(strings.TrimSpace(string(raw)), "\n\n")
		lastEvent := events[len(events)-1]
		if !strings.Contains(lastEvent, `"error"`) || !strings.Contains(lastEvent, "does not meet the strict response format") || strings.Contains(string(raw), "[DONE]") {
			t.Fatalf("stream:\n%s", raw)
		}
	})
}

func TestContractStructuredOutputsSDK(t *testing.T) {
	env, up, key, _ := wireEnv(t)
	c := sdk(t, env, key)
	up.set(chatReply(`{"name":"Ada","age":36,"tags":["a","b"]}`))
	var schema map[string]any
	_ = json.Unmarshal([]byte(personSchema), &schema)
	res, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    "oai/m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who wrote the first program?")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schema, Strict: openai.Bool(true)},
		}},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "lookup", Strict: openai.Bool(true),
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []string{"q"}, "additionalProperties": false},
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	var person struct {
		Name string   `json:"name"`
		Age  int      `json:"age"`
		Tags []string `json:"tags"`
	}
	if err := json.Unmarshal([]byte(res.Choices[0].Message.Content), &person); err != nil || person.Name != "Ada" || person.Age != 36 {
		t.Fatalf("%v %+v", err, person)
	}
	var tools []struct {
		Function struct {
			Strict *bool `json:"strict"`
		} `json:"function"`
	}
	_ = json.Unmarshal(up.last(t)["tools"], &tools)
	if len(tools) != 1 || tools[0].Function.Strict == nil || !*tools[0].Function.Strict {
		t.Errorf("upstream tools %s", up.last(t)["tools"])
	}
}

func TestContractOpenAIFieldsAreCarriedOrRefused(t *testing.T) {
	env, up, key, others := wireEnv(t)
	hc := env.HTTPClient(t, servertest.WithKey(key), servertest.AllowInvalidRequests())
	up.set(chatReply("hi"))
	t.Run("passed through verbatim to an OpenAI-compatible upstream", func(t *testing.T) {
		fields := map[string]string{
			"logprobs": `true`, "top_logprobs": `2`, "logit_bias": `{"50256":-100}`, "seed": `7`, "reasoning_effort": `"low"`,
			"service_tier": `"flex"`, "user": `"u-1"`, "metadata": `{"team":"a"}`, "parallel_tool_calls": `false`,
			"prediction": `{"type":"content","content":"hi"}`, "stop": `["END"]`, "store": `true`, "top_k": `40`,
		}
		var b strings.Builder
		b.WriteString(`{"model":"oai/m","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f"}}]`)
		for k, v := range fields {
			fmt.Fprintf(&b, ",%q:%s", k, v)
		}
		b.WriteString("}")
		status, _, body := openAIPost(t, hc, env.URL+"/openai/v1/chat/completions", b.String())
		if status != 200 {
			t.Fatalf("%d %v", status, body)
		}
		sent := up.last(t)
		for k, v := range fields {
			var got, want any
			_ = json.Unmarshal(sent[k], &got)
			_ = json.Unmarshal([]byte(v), &want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: upstream got %s, want %s", k, sent[k], v)
			}
		}
		lp := body["choices"].([]any)[0].(map[string]any)["logprobs"]
		if lp == nil || !strings.Contains(fmt.Sprint(lp), "-0.25") {
			t.Errorf("logprobs not returned: %v", body)
		}
	})
	t.Run("n choices", func(t *testing.T) {
		up.set(chatReply("one", "two", "three"))
		status, _, body := openAIPost(t, hc, env.URL+"/openai/v1/chat/completions", `{"model":"oai/m","n":3,"messages":[{"role":"user","content":"Hi"}]}`)
		choices, _ := body["choices"].([]any)
		if status != 200 || len(choices) != 3 || string(up.last(t)["n"]) != "3" {
			t.Fatalf("%d %v", status, body)
		}
		for i, want := range []string{"one", "two", "three"} {
			ch := choices[i].(map[string]any)
			if ch["index"] != float64(i) || ch["message"].(map[string]any)["content"] != want {
				t.Errorf("choice %d: %v", i, ch)
			}
		}
	})
	t.Run("n choices, streamed", func(t *testing.T) {
		up.set(func(w http.ResponseWriter, _ map[string]json.RawMessage) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range []string{
				`{"choices":[{"index":0,"delta":{"role":"assistant","content":"he"}}]}`,
				`{"choices":[{"index":1,"delta":{"role":"assistant","content":"ye"}}]}`,
				`{"choices":[{"index":0,"delta":{"content":"llo"},"finish_reason":"stop"},{"index":1,"delta":{"content":"s"},"finish_reason":"length"}]}`,
				`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
			} {
				fmt.Fprintf(w, "data: %s\n\n", ev)
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		})
		c := sdk(t, env, key)
		stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
			Model: "oai/m", N: openai.Int(2), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 2 || acc.Choices[0].Message.Content != "hello" || acc.Choices[1].Message.Content != "yes" ||
			acc.Choices[0].FinishReason != "stop" || acc.Choices[1].FinishReason != "length" || acc.Usage.TotalTokens != 7 {
			t.Fatalf("accumulated %+v usage %+v", acc.Choices, acc.Usage)
		}
	})
	up.set(chatReply("hi"))
	for _, tc := range []struct {
		name, model, extra, param string
	}{
		{"logprobs to Anthropic", "anth/claude-x", `"logprobs":true`, "logprobs"},
		{"logit_bias to Gemini", "gem/gemini-x", `"logit_bias":{"1":5}`, "logit_bias"},
		{"n to Anthropic", "anth/claude-x", `"n":2`, "n"},
		{"a server's own extension to Anthropic", "anth/claude-x", `"top_k":40`, "top_k"},
		{"service_tier to Gemini", "gem/gemini-x", `"service_tier":"flex"`, "service_tier"},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			before := others.Load()
			status, _, body := openAIPost(t, hc, env.URL+"/openai/v1/chat/completions",
				`{"model":"`+tc.model+`","messages":[{"role":"user","content":"Hi"}],`+tc.extra+`}`)
			e, _ := body["error"].(map[string]any)
			if status != 400 || e == nil || e["param"] != tc.param || !strings.Contains(e["message"].(string), tc.param) || !strings.Contains(e["message"].(string), tc.model) || others.Load() != before {
				t.Fatalf("%d %v", status, body)
			}
		})
	}
	t.Run("default values ask for nothing and are not refused", func(t *testing.T) {
		status, _, body := openAIPost(t, hc, env.URL+"/openai/v1/chat/completions",
			`{"model":"anth/claude-x","messages":[{"role":"user","content":"Hi"}],"logprobs":false,"logit_bias":{},"metadata":null,"n":1,"modalities":["text"]}`)
		if status != 200 {
			t.Fatalf("%d %v", status, body)
		}
	})
}

func TestContractTokenArrayEmbeddings(t *testing.T) {
	env, up, key, _ := wireEnv(t)
	hc := env.HTTPClient(t, servertest.WithKey(key))
	for _, tc := range []struct {
		name, model, input string
		want               []string // the texts the upstream receives
		vectors            int
	}{
		{"token-id arrays, decoded for an OpenAI-compatible server", "oai/text-embedding-3-small", `[[9906,1917],[9906]]`, []string{"Hello world", "Hello"}, 2},
		{"one token-id array", "oai/text-embedding-3-small", `[9906,1917]`, []string{"Hello world"}, 1},
		{"token ids on the built-in model", "local/hash-embed-384", `[[9906,1917]]`, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := openAIPost(t, hc, env.URL+"/openai/v1/embeddings", `{"model":"`+tc.model+`","input":`+tc.input+`}`)
			data, _ := body["data"].([]any)
			if status != 200 || len(data) != tc.vectors {
				t.Fatalf("%d %v", status, body)
			}
			if tc.want != nil {
				var got []string
				_ = json.Unmarshal(up.last(t)["input"], &got)
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("upstream input %s, want %q", up.last(t)["input"], tc.want)
				}
			}
		})
	}
	t.Run("the same text as tokens and as a string embeds the same", func(t *testing.T) {
		vec := func(input string) string {
			_, _, body := openAIPost(t, hc, env.URL+"/openai/v1/embeddings", `{"model":"local/hash-embed-384","input":`+input+`}`)
			return fmt.Sprint(body["data"].([]any)[0].(map[string]any)["embedding"])
		}
		if vec(`[[9906,1917]]`) != vec(`"Hello world"`) {
			t.Error("token ids and their text embed differently")
		}
	})
}
