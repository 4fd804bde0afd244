package server_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	kept "github.com/switchboard-dev/terraform-provider-switchboard/server/responses"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// chatUpstream is an OpenAI-compatible upstream (the fixtures of
// server/llm/testdata/openai) that records the chat requests it receives.
type chatUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []map[string]any
}

// last returns the last chat request the upstream received.
func (u *chatUpstream) last(t *testing.T) map[string]any {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatal("the upstream received no request")
	}
	return u.seen[len(u.seen)-1]
}

func newChatUpstream(t *testing.T) *chatUpstream {
	u := &chatUpstream{}
	chat := llmFixture(t, "openai/chat_completion.json")
	tools := llmFixture(t, "openai/chat_completion_tool_calls.json")
	stream := llmFixture(t, "openai/chat_stream.txt")
	toolStream := llmFixture(t, "openai/chat_stream_tool_calls.txt")
	broken := llmFixture(t, "openai/chat_stream_error.txt")
	long := []byte(`{"id":"chatcmpl-long","object":"chat.completion","created":1699896916,"model":"long","choices":[{"index":0,"message":{"role":"assistant","content":"Once upon a"},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
	city := []byte(`{"id":"chatcmpl-city","object":"chat.completion","created":1699896916,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"{\"name\":\"Paris\"}"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`)
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		u.mu.Lock()
		u.seen = append(u.seen, body)
		u.mu.Unlock()
		stream_, _ := body["stream"].(bool)
		_, hasTools := body["tools"]
		send := func(ct string, b []byte) {
			w.Header().Set("Content-Type", ct)
			_, _ = w.Write(b)
		}
		switch {
		case r.URL.Path != "/v1/chat/completions":
			http.NotFound(w, r)
		case body["model"] == "broken":
			send("text/event-stream", broken)
		case body["model"] == "thinking":
			// A long silence before the first token, as while a reasoning model thinks.
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond)
			_, _ = w.Write(stream)
		case body["model"] == "long":
			send("application/json", long)
		case body["response_format"] != nil && !stream_:
			send("application/json", city)
		case stream_ && hasTools:
			send("text/event-stream", toolStream)
		case stream_:
			send("text/event-stream", stream)
		case hasTools:
			send("application/json", tools)
		default:
			send("application/json", chat)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// responsesEnv starts a server whose `openai` provider is a chatUpstream.
func responsesEnv(t *testing.T) (*servertest.Env, *chatUpstream) {
	up := newChatUpstream(t)
	model := func(name string, caps ...string) config.Model {
		return config.Model{Name: name, Capabilities: append([]string{"chat"}, caps...), MaxTokens: 128000, Pricing: &config.Pricing{Input: 0.15, Output: 0.60}}
	}
	env := servertest.New(t, func(c *config.Config) {
		c.Providers = []config.Provider{{Name: "openai", Type: "openai", BaseURL: up.URL + "/v1", Timeout: config.Duration(5 * time.Second),
			Models: []config.Model{model("gpt-4o-mini"), model("long"), model("broken"), model("thinking"), model("gpt-4o", "vision")}}}
	})
	return env, up
}

// responseObject is the part of a response object the tests read.
type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Status             string            `json:"status"`
	Model              string            `json:"model"`
	Instructions       *string           `json:"instructions"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Temperature        float64           `json:"temperature"`
	Store              bool              `json:"store"`
	Metadata           map[string]string `json:"metadata"`
	IncompleteDetails  *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Output []struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Status  string `json:"status"`
		Role    string `json:"role"`
		Content []struct {
			Type        string            `json:"type"`
			Text        string            `json:"text"`
			Annotations []json.RawMessage `json:"annotations"`
		} `json:"content"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"output"`
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// text is the output text of the response, as the SDKs compute it.
func (r *responseObject) text() string {
	var b strings.Builder
	for _, o := range r.Output {
		for _, c := range o.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// openAIErr is OpenAI's error body.
type openAIErr struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// call sends a request and decodes the JSON answer into out (when not nil),
// returning the status.
func call(t *testing.T, h *http.Client, method, url, body string, out any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s = %d %s: %v", method, url, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

// messages returns the role and content of the messages of a recorded
// upstream chat request, as "role: content" (tool calls as
// "assistant: call <id> <name>", tool turns as "tool <id>: content").
func messages(body map[string]any) []string {
	var out []string
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		m := m.(map[string]any)
		role, _ := m["role"].(string)
		content, _ := m["content"].(string)
		if calls, ok := m["tool_calls"].([]any); ok {
			for _, c := range calls {
				c := c.(map[string]any)
				out = append(out, "assistant: call "+c["id"].(string)+" "+c["function"].(map[string]any)["name"].(string))
			}
			continue
		}
		if id, ok := m["tool_call_id"].(string); ok {
			role += " " + id
		}
		out = append(out, role+": "+content)
	}
	return out
}

func TestContractResponses(t *testing.T) {
	env, up := responsesEnv(t)
	key := createKey(t, env.Client(t), "responses", []client.Scope{client.ScopeLLM}, nil)
	h := env.HTTPClient(t, servertest.WithKey(key.Key))
	url := env.URL + "/openai/v1/responses"

	t.Run("string input with instructions", func(t *testing.T) {
		var r responseObject
		status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"Hi","instructions":"Be brief.","metadata":{"k":"v"},"temperature":0.3}`, &r)
		if status != 200 || !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || r.Status != "completed" || r.Model != "openai/gpt-4o-mini" ||
			r.text() != "Hello! How can I assist you today?" || r.Usage == nil || r.Usage.InputTokens != 19 || r.Usage.OutputTokens != 10 || r.Usage.TotalTokens != 29 ||
			r.Instructions == nil || *r.Instructions != "Be brief." || r.Metadata["k"] != "v" || r.Temperature != 0.3 || !r.Store {
			t.Fatalf("%d %+v", status, r)
		}
		if o := r.Output[0]; o.Type != "message" || !strings.HasPrefix(o.ID, "msg_") || o.Status != "completed" || o.Role != "assistant" || o.Content[0].Annotations == nil {
			t.Errorf("output %+v", o)
		}
		if got := strings.Join(messages(up.last(t)), " | "); got != "system: Be brief. | user: Hi" {
			t.Errorf("upstream saw %s", got)
		}
	})

	tools := `"tools":[{"type":"function","name":"get_current_weather","description":"Get the weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}]`
	t.Run("tools, tool_choice and the function call round trip", func(t *testing.T) {
		var r responseObject
		status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"Weather in Boston?",`+tools+`,"tool_choice":{"type":"function","name":"get_current_weather"}}`, &r)
		if status != 200 || len(r.Output) != 1 {
			t.Fatalf("%d %+v", status, r)
		}
		fc := r.Output[0]
		if fc.Type != "function_call" || !strings.HasPrefix(fc.ID, "fc_") || fc.CallID != "call_abc123" || fc.Name != "get_current_weather" || fc.Arguments != "{\n\"location\": \"Boston, MA\"\n}" || fc.Status != "completed" {
			t.Fatalf("function call %+v", fc)
		}
		sent := up.last(t)
		tc, _ := sent["tool_choice"].(map[string]any)
		tl, _ := sent["tools"].([]any)
		if tc["type"] != "function" || tc["function"].(map[string]any)["name"] != "get_current_weather" || len(tl) != 1 ||
			tl[0].(map[string]any)["function"].(map[string]any)["name"] != "get_current_weather" {
			t.Errorf("upstream saw tool_choice %v tools %v", sent["tool_choice"], sent["tools"])
		}
		// Send the call and its output back as items, as SDK users do.
		items := `[{"role":"user","content":"Weather in Boston?"},` +
			`{"type":"function_call","id":"` + fc.ID + `","call_id":"call_abc123","name":"get_current_weather","arguments":"{\"location\":\"Boston, MA\"}","status":"completed"},` +
			`{"type":"function_call_output","call_id":"call_abc123","output":"{\"temperature\":22}"}]`
		var next responseObject
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":`+items+`,`+tools+`,"store":false}`, &next); status != 200 {
			t.Fatalf("%d %+v", status, next)
		}
		want := `user: Weather in Boston? | assistant: call call_abc123 get_current_weather | tool call_abc123: {"temperature":22}`
		if got := strings.Join(messages(up.last(t)), " | "); got != want {
			t.Errorf("upstream saw %s\nwant %s", got, want)
		}
	})

	t.Run("message items with parts and developer role", func(t *testing.T) {
		items := `[{"type":"message","role":"developer","content":[{"type":"input_text","text":"Answer in French."}]},` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"Hello"},{"type":"input_text","text":"there"}]},` +
			`{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"Bonjour","annotations":[]}]},` +
			`{"role":"user","content":"Again"}]`
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":`+items+`}`, nil); status != 200 {
			t.Fatalf("status %d", status)
		}
		want := "system: Answer in French. | user: Hello\nthere | assistant: Bonjour | user: Again"
		if got := strings.Join(messages(up.last(t)), " | "); got != want {
			t.Errorf("upstream saw %q\nwant %q", got, want)
		}
	})

	t.Run("input_image parts reach a vision model as image_url parts", func(t *testing.T) {
		items := `[{"role":"user","content":[{"type":"input_text","text":"What is in these?"},` +
			`{"type":"input_image","image_url":"` + tinyPNGURL + `","detail":"low"},{"type":"input_image","image_url":"https://images.example/cat.png"}]}]`
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o","input":`+items+`}`, nil); status != 200 {
			t.Fatalf("status %d", status)
		}
		parts, _ := up.last(t)["messages"].([]any)[0].(map[string]any)["content"].([]any)
		want := []any{
			map[string]any{"type": "text", "text": "What is in these?"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": tinyPNGURL, "detail": "low"}},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://images.example/cat.png"}},
		}
		if g, w := jsonText(parts), jsonText(want); g != w {
			t.Errorf("upstream content\n got %s\nwant %s", g, w)
		}
		var e openAIErr
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":`+items+`}`, &e); status != 400 || !strings.Contains(e.Error.Message, "does not support vision") {
			t.Errorf("a model without vision: %d %+v", status, e.Error)
		}
	})

	t.Run("text.format json_schema reaches the upstream as response_format", func(t *testing.T) {
		body := `{"model":"openai/gpt-4o-mini","input":"Name a city.","text":{"format":{"type":"json_schema","name":"city","strict":true,"schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}}}}`
		var r responseObject
		if status := call(t, h, http.MethodPost, url, body, &r); status != 200 {
			t.Fatalf("%d %+v", status, r)
		}
		rf, _ := up.last(t)["response_format"].(map[string]any)
		js, _ := rf["json_schema"].(map[string]any)
		if rf["type"] != "json_schema" || js["name"] != "city" || js["strict"] != true || js["schema"] == nil {
			t.Errorf("upstream saw response_format %v", up.last(t)["response_format"])
		}
		if r.text() != `{"name":"Paris"}` {
			t.Errorf("output %q", r.text())
		}
	})

	t.Run("max_output_tokens reached: incomplete", func(t *testing.T) {
		var r responseObject
		status := call(t, h, http.MethodPost, url, `{"model":"openai/long","input":"Tell a story","max_output_tokens":3}`, &r)
		if status != 200 || r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" || r.text() != "Once upon a" {
			t.Fatalf("%d %+v", status, r)
		}
		if mt, _ := up.last(t)["max_tokens"].(float64); mt != 3 {
			t.Errorf("upstream saw max_tokens %v", up.last(t)["max_tokens"])
		}
	})

	t.Run("stored: retrieve, delete, then 404", func(t *testing.T) {
		var r responseObject
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"Hi"}`, &r); status != 200 {
			t.Fatalf("%d", status)
		}
		for _, flushed := range []bool{false, true} {
			if flushed {
				if err := env.Server.Responses().Flush(bg); err != nil {
					t.Fatal(err)
				}
			}
			var got responseObject
			if status := call(t, h, http.MethodGet, url+"/"+r.ID, "", &got); status != 200 || got.ID != r.ID || got.text() != r.text() || got.Output[0].ID != r.Output[0].ID {
				t.Fatalf("flushed %v: %d %+v", flushed, status, got)
			}
		}
		var del struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Deleted bool   `json:"deleted"`
		}
		if status := call(t, h, http.MethodDelete, url+"/"+r.ID, "", &del); status != 200 || del.ID != r.ID || del.Object != "response.deleted" || !del.Deleted {
			t.Fatalf("delete %d %+v", status, del)
		}
		var e openAIErr
		if status := call(t, h, http.MethodGet, url+"/"+r.ID, "", &e); status != 404 || e.Error == nil || e.Error.Type != "invalid_request_error" {
			t.Errorf("after delete: %d %+v", status, e.Error)
		}
		if status := call(t, h, http.MethodDelete, url+"/"+r.ID, "", &e); status != 404 {
			t.Errorf("second delete: %d", status)
		}
	})

	t.Run("a deleted response that was still waiting is never written", func(t *testing.T) {
		var r responseObject
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"Hi"}`, &r); status != 200 {
			t.Fatalf("%d", status)
		}
		if status := call(t, h, http.MethodDelete, url+"/"+r.ID, "", nil); status != 200 {
			t.Fatalf("delete %d", status)
		}
		if err := env.Server.Responses().Flush(bg); err != nil {
			t.Fatal(err)
		}
		if status := call(t, h, http.MethodGet, url+"/"+r.ID, "", nil); status != 404 {
			t.Errorf("after delete and flush: %d", status)
		}
	})

	t.Run("store false: nothing to retrieve", func(t *testing.T) {
		var r responseObject
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"Hi","store":false}`, &r); status != 200 || r.Store {
			t.Fatalf("%d %+v", status, r)
		}
		if err := env.Server.Responses().Flush(bg); err != nil {
			t.Fatal(err)
		}
		var e openAIErr
		if status := call(t, h, http.MethodGet, url+"/"+r.ID, "", &e); status != 404 || e.Error == nil {
			t.Errorf("%d %+v", status, e)
		}
	})

	t.Run("previous_response_id continues the conversation", func(t *testing.T) {
		var first, second, third responseObject
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"My name is Ada.","instructions":"Be brief."}`, &first); status != 200 {
			t.Fatalf("%d", status)
		}
		// At once, before any flush: served from the pending set.
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"What is my name?","previous_response_id":"`+first.ID+`"}`, &second); status != 200 ||
			second.PreviousResponseID == nil || *second.PreviousResponseID != first.ID {
			t.Fatalf("%d %+v", status, second)
		}
		want := "user: My name is Ada. | assistant: Hello! How can I assist you today? | user: What is my name?"
		if got := strings.Join(messages(up.last(t)), " | "); got != want {
			t.Errorf("upstream saw %q\nwant %q (instructions are not carried over)", got, want)
		}
		if err := env.Server.Responses().Flush(bg); err != nil {
			t.Fatal(err)
		}
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":[{"role":"user","content":"And again?"}],"instructions":"Be kind.","previous_response_id":"`+second.ID+`"}`, &third); status != 200 {
			t.Fatalf("%d", status)
		}
		want = "system: Be kind. | " + want + " | assistant: Hello! How can I assist you today? | user: And again?"
		if got := strings.Join(messages(up.last(t)), " | "); got != want {
			t.Errorf("upstream saw %q\nwant %q", got, want)
		}
		var e openAIErr
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"Hi","previous_response_id":"resp_unknown"}`, &e); status != 404 || e.Error == nil || e.Error.Param == nil || *e.Error.Param != "previous_response_id" {
			t.Errorf("unknown previous_response_id: %d %+v", status, e.Error)
		}
	})

	t.Run("a conversation past the size limit is refused", func(t *testing.T) {
		big, _ := json.Marshal([]map[string]string{{"role": "user", "content": strings.Repeat("a", 17<<20)}})
		env.Server.Responses().Put(&kept.Stored{ID: "resp_big", Owner: key.Id, Input: big, Response: json.RawMessage(`{}`)})
		var e openAIErr
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"Hi","previous_response_id":"resp_big"}`, &e); status != 413 ||
			e.Error == nil || e.Error.Param == nil || *e.Error.Param != "previous_response_id" {
			t.Errorf("%d %+v", status, e.Error)
		}
	})

	t.Run("another credential's response is not found", func(t *testing.T) {
		var r responseObject
		if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"Secret plans"}`, &r); status != 200 {
			t.Fatalf("%d", status)
		}
		other := env.HTTPClient(t, servertest.WithKey(createKey(t, env.Client(t), "other", []client.Scope{client.ScopeLLM}, nil).Key))
		for _, flushed := range []bool{false, true} {
			if flushed {
				if err := env.Server.Responses().Flush(bg); err != nil {
					t.Fatal(err)
				}
			}
			var e openAIErr
			if status := call(t, other, http.MethodGet, url+"/"+r.ID, "", &e); status != 404 || strings.Contains(e.Error.Message, "Secret") {
				t.Errorf("flushed %v: GET %d %+v", flushed, status, e.Error)
			}
			if status := call(t, other, http.MethodDelete, url+"/"+r.ID, "", nil); status != 404 {
				t.Errorf("flushed %v: DELETE %d", flushed, status)
			}
			if status := call(t, other, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"Hi","previous_response_id":"`+r.ID+`"}`, &e); status != 404 || *e.Error.Param != "previous_response_id" {
				t.Errorf("flushed %v: continue %d %+v", flushed, status, e.Error)
			}
		}
		if status := call(t, h, http.MethodGet, url+"/"+r.ID, "", nil); status != 200 {
			t.Errorf("the owner: %d", status)
		}
	})
}

func TestContractResponsesFields(t *testing.T) {
	env, _ := responsesEnv(t)
	loose := env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())
	url := env.URL + "/openai/v1/responses"
	const base = `"model":"openai/gpt-4o-mini","input":"Hi"`
	for _, tc := range []struct {
		name, body string
		status     int
		param      string
	}{
		{"defaults that change nothing are accepted", base + `,"truncation":"disabled","background":false,"include":[],"stream_options":{"include_obfuscation":false},"conversation":null,"tools":[{"type":"function","name":"f","strict":false,"defer_loading":false}]`, 200, ""},
		{"passthrough fields are carried", base + `,"service_tier":"auto","prompt_cache_key":"k1"`, 200, ""},
		{"a built-in tool", base + `,"tools":[{"type":"function","name":"f"},{"type":"web_search"}]`, 400, "tools[1].type"},
		{"file_search", base + `,"tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]`, 400, "tools[0].type"},
		{"a tool key the route does not carry", base + `,"tools":[{"type":"function","name":"f","output_schema":{"type":"object"}}]`, 400, "tools[0].output_schema"},
		{"background true", base + `,"background":true`, 400, "background"},
		{"conversation", base + `,"conversation":"conv_1"`, 400, "conversation"},
		{"prompt", base + `,"prompt":{"id":"pmpt_1"}`, 400, "prompt"},
		{"include with values", base + `,"include":["reasoning.encrypted_content"]`, 400, "include"},
		{"truncation auto", base + `,"truncation":"auto"`, 400, "truncation"},
		{"top_logprobs", base + `,"top_logprobs":3`, 400, "top_logprobs"},
		{"max_tool_calls", base + `,"max_tool_calls":2`, 400, "max_tool_calls"},
		{"an unknown field", base + `,"frobnicate":1`, 400, "frobnicate"},
		{"several refused fields: the first in name order", base + `,"zeta":1,"truncation":"auto","background":true,"prompt":{"id":"pmpt_1"},"service_tier":"flex"`, 400, "background"},
		{"a refused field sent as null is not there", base + `,"prompt":null,"top_logprobs": null `, 200, ""},
		{"a known field in another case", base + `,"MODEL":"openai/long"`, 400, "MODEL"},
		{"reasoning summary", base + `,"reasoning":{"effort":"low","summary":"auto"}`, 400, "reasoning.summary"},
		{"reasoning effort out of range", base + `,"reasoning":{"effort":"extreme"}`, 400, "reasoning.effort"},
		{"a built-in tool choice", base + `,"tool_choice":{"type":"web_search_preview"}`, 400, "tool_choice.type"},
		{"an unsupported item", `"model":"openai/gpt-4o-mini","input":[{"type":"item_reference","id":"msg_1"}]`, 400, "input[0].type"},
		{"an image by file id", `"model":"openai/gpt-4o-mini","input":[{"role":"user","content":[{"type":"input_image","file_id":"file_1"}]}]`, 400, "input[0].content[0].file_id"},
		{"an image in an assistant message", `"model":"openai/gpt-4o-mini","input":[{"role":"assistant","content":[{"type":"input_image","image_url":"https://example.com/a.png"}]}]`, 400, "input[0].content"},
		{"an image detail OpenAI does not know", `"model":"openai/gpt-4o-mini","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://example.com/a.png","detail":"ultra"}]}]`, 400, "input[0].content[0].detail"},
		{"a file part", `"model":"openai/gpt-4o-mini","input":[{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}]`, 400, "input[0].content[0].type"},
		{"an unknown role", `"model":"openai/gpt-4o-mini","input":[{"role":"wizard","content":"Hi"}]`, 400, "input[0].role"},
		{"a function call without call_id", `"model":"openai/gpt-4o-mini","input":[{"type":"function_call","name":"f","arguments":"{}"}]`, 400, "input[0].call_id"},
		{"json_schema without schema", base + `,"text":{"format":{"type":"json_schema","name":"x"}}`, 400, "text.format.schema"},
		{"max_output_tokens over the model's limit", base + `,"max_output_tokens":999999`, 400, "max_output_tokens"},
		{"no input", `"model":"openai/gpt-4o-mini"`, 400, "input"},
		{"unknown model", `"model":"openai/gpt-9","input":"Hi"`, 404, "model"},
		{"too many metadata keys", base + `,"metadata":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9","j":"10","k":"11","l":"12","m":"13","n":"14","o":"15","p":"16","q":"17"}`, 400, "metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e openAIErr
			status := call(t, loose, http.MethodPost, url, "{"+tc.body+"}", &e)
			if status != tc.status {
				t.Fatalf("status %d, want %d (%+v)", status, tc.status, e.Error)
			}
			if tc.status == 200 {
				return
			}
			if e.Error == nil || e.Error.Message == "" || e.Error.Param == nil || *e.Error.Param != tc.param {
				t.Fatalf("error %+v, want param %s", e.Error, tc.param)
			}
		})
	}
}

// streamEvent is one event of a streamed response.
type streamEvent struct {
	name string
	data map[string]any
}

func readResponseEvents(t *testing.T, h *http.Client, url, body string) []streamEvent {
	t.Helper()
	resp, err := h.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	var out []streamEvent
	for i, e := range readSSE(t, resp.Body) {
		var data map[string]any
		if err := json.Unmarshal([]byte(e.data), &data); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if data["type"] != e.name || data["sequence_number"] != float64(i) {
			t.Errorf("event %d %q: type %v, sequence_number %v", i, e.name, data["type"], data["sequence_number"])
		}
		out = append(out, streamEvent{name: e.name, data: data})
	}
	return out
}

func eventNames(evs []streamEvent) string {
	names := make([]string, len(evs))
	for i, e := range evs {
		names[i] = strings.TrimPrefix(e.name, "response.")
	}
	return strings.Join(names, " ")
}

func TestContractResponsesStreaming(t *testing.T) {
	env, _ := responsesEnv(t)
	h := env.HTTPClient(t, servertest.WithKey(env.AdminKey))
	url := env.URL + "/openai/v1/responses"
	for _, tc := range []struct {
		name, body, events string
		check              func(t *testing.T, evs []streamEvent)
	}{
		{"text", `{"model":"openai/gpt-4o-mini","input":"Hi","stream":true}`,
			"created in_progress output_item.added content_part.added output_text.delta output_text.delta output_text.delta output_text.done content_part.done output_item.done completed",
			func(t *testing.T, evs []streamEvent) {
				if r := evs[0].data["response"].(map[string]any); r["status"] != "in_progress" || len(r["output"].([]any)) != 0 {
					t.Errorf("created %v", r)
				}
				var deltas []string
				for _, e := range evs[4:7] {
					deltas = append(deltas, e.data["delta"].(string))
				}
				if strings.Join(deltas, "|") != "Hello|!| How can I help?" || evs[7].data["text"] != "Hello! How can I help?" {
					t.Errorf("deltas %q, done %v", deltas, evs[7].data["text"])
				}
				if evs[2].data["item"].(map[string]any)["id"] != evs[4].data["item_id"] {
					t.Errorf("delta item_id %v is not the added item's", evs[4].data["item_id"])
				}
				done := evs[len(evs)-1].data["response"].(map[string]any)
				usage := done["usage"].(map[string]any)
				out := done["output"].([]any)[0].(map[string]any)
				if done["status"] != "completed" || usage["input_tokens"] != 9.0 || usage["output_tokens"] != 6.0 || usage["total_tokens"] != 15.0 ||
					out["content"].([]any)[0].(map[string]any)["text"] != "Hello! How can I help?" || out["status"] != "completed" {
					t.Errorf("completed %v", done)
				}
			}},
		{"function call", `{"model":"openai/gpt-4o-mini","input":"Weather?","stream":true,"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`,
			"created in_progress output_item.added function_call_arguments.delta function_call_arguments.delta function_call_arguments.delta function_call_arguments.delta function_call_arguments.delta function_call_arguments.done output_item.done completed",
			func(t *testing.T, evs []streamEvent) {
				added := evs[2].data["item"].(map[string]any)
				if added["type"] != "function_call" || added["call_id"] != "call_DdmO9pD3xa9XTPNJ32zg2hcA" || added["name"] != "get_weather" || added["status"] != "in_progress" {
					t.Errorf("added %v", added)
				}
				if d := evs[8].data; d["arguments"] != `{"location":"Paris"}` || d["name"] != "get_weather" || d["item_id"] != added["id"] {
					t.Errorf("arguments done %v", d)
				}
				done := evs[len(evs)-1].data["response"].(map[string]any)
				fc := done["output"].([]any)[0].(map[string]any)
				if fc["arguments"] != `{"location":"Paris"}` || fc["status"] != "completed" || done["usage"].(map[string]any)["total_tokens"] != 71.0 {
					t.Errorf("completed %v", done)
				}
			}},
		{"an upstream failure mid-stream", `{"model":"openai/broken","input":"Hi","stream":true}`,
			"created in_progress output_item.added content_part.added output_text.delta error failed",
			func(t *testing.T, evs []streamEvent) {
				e := evs[len(evs)-2].data
				failed := evs[len(evs)-1].data["response"].(map[string]any)
				rerr, _ := failed["error"].(map[string]any)
				if e["message"] == "" || e["code"] == "" || failed["status"] != "failed" || rerr["message"] != e["message"] {
					t.Errorf("error %v, failed %v", e, failed)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := readResponseEvents(t, h, url, tc.body)
			if got := eventNames(evs); got != tc.events {
				t.Fatalf("events\n%s\nwant\n%s", got, tc.events)
			}
			tc.check(t, evs)
		})
	}
	t.Run("keep-alive comments while the model is silent", func(t *testing.T) {
		env.Server.LLM().KeepAlive = 50 * time.Millisecond
		defer func() { env.Server.LLM().KeepAlive = 0 }()
		resp, err := h.Post(url, "application/json", strings.NewReader(`{"model":"openai/thinking","input":"Hi","stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n := strings.Count(string(raw), ": keep-alive\n\n"); n < 2 || !strings.Contains(string(raw), "event: response.completed") {
			t.Errorf("%d keep-alives while waiting 300 ms at a 50 ms interval:\n%s", n, raw)
		}
	})
	t.Run("a streamed response is stored", func(t *testing.T) {
		evs := readResponseEvents(t, h, url, `{"model":"openai/gpt-4o-mini","input":"Hi","stream":true}`)
		id := evs[0].data["response"].(map[string]any)["id"].(string)
		var r responseObject
		if status := call(t, h, http.MethodGet, url+"/"+id, "", &r); status != 200 || r.text() != "Hello! How can I help?" || r.Usage.TotalTokens != 15 {
			t.Errorf("%d %+v", status, r)
		}
	})
}

func TestContractResponsesUsage(t *testing.T) {
	env, _ := responsesEnv(t)
	key := createKey(t, env.Client(t), "usage", []client.Scope{client.ScopeLLM}, nil)
	h := env.HTTPClient(t, servertest.WithKey(key.Key))
	url := env.URL + "/openai/v1/responses"
	if status := call(t, h, http.MethodPost, url, `{"model":"openai/gpt-4o-mini","input":"Hi"}`, nil); status != 200 {
		t.Fatalf("%d", status)
	}
	readResponseEvents(t, h, url, `{"model":"openai/gpt-4o-mini","input":"Hi","stream":true}`)
	groupBy := []client.UsageGroupBy{client.UsageGroupByKey, client.UsageGroupByModel}
	res, err := env.Client(t).GetUsageWithResponse(bg, &client.GetUsageParams{GroupBy: &groupBy, Key: &key.Id})
	if err != nil || res.JSON200 == nil {
		t.Fatalf("%v %v", err, res)
	}
	rows := res.JSON200.Data
	// 19+10 tokens for the completion, 9+6 for the stream.
	if len(rows) != 1 || rows[0].Requests != 2 || rows[0].PromptTokens != 28 || rows[0].CompletionTokens != 16 || *rows[0].Model != "openai/gpt-4o-mini" || rows[0].CostUsd <= 0 {
		t.Errorf("usage %s", res.Body)
	}
}

func TestContractResponsesAnthropic(t *testing.T) {
	up := fakeNonOpenAI(t)
	env := servertest.New(t, func(c *config.Config) {
		c.Providers = []config.Provider{{Name: "anthropic", Type: "anthropic", BaseURL: up.URL + "/anthropic/v1",
			Models: []config.Model{{Name: "claude-3-5-haiku-latest", MaxTokens: 200000}}}}
	})
	h := env.HTTPClient(t, servertest.WithKey(env.AdminKey))
	url := env.URL + "/openai/v1/responses"

	t.Run("text", func(t *testing.T) {
		var r responseObject
		if status := call(t, h, http.MethodPost, url, `{"model":"anthropic/claude-3-5-haiku-latest","input":"Hi","instructions":"Be brief."}`, &r); status != 200 ||
			r.text() != "Hi! My name is Claude." || r.Usage.InputTokens != 2095 || r.Usage.OutputTokens != 503 {
			t.Fatalf("%d %+v", status, r)
		}
	})
	t.Run("streamed text then tool use", func(t *testing.T) {
		evs := readResponseEvents(t, h, url, `{"model":"anthropic/claude-3-5-haiku-latest","input":"Weather in SF?","stream":true,"tools":[{"type":"function","name":"get_weather","strict":false,"parameters":{"type":"object","properties":{"location":{"type":"string"}}}}]}`)
		names := eventNames(evs)
		prefix := "created in_progress output_item.added content_part.added output_text.delta output_text.delta output_text.done content_part.done output_item.done output_item.added function_call_arguments.delta"
		if !strings.HasPrefix(names, prefix) || !strings.HasSuffix(names, "function_call_arguments.done output_item.done completed") {
			t.Fatalf("events %s", names)
		}
		done := evs[len(evs)-1].data["response"].(map[string]any)
		out := done["output"].([]any)
		fc := out[1].(map[string]any)
		usage := done["usage"].(map[string]any)
		if len(out) != 2 || out[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "Okay, let me check the weather." ||
			fc["call_id"] != "toolu_01T1x1fJ34qAmk2tNTrN7Up6" || fc["arguments"] != `{"location": "San Francisco, CA", "unit": "fahrenheit"}` ||
			usage["input_tokens"] != 472.0 || usage["output_tokens"] != 89.0 {
			t.Errorf("completed %v", done)
		}
	})
}

func TestContractResponsesSDK(t *testing.T) {
	env, up := responsesEnv(t)
	c := sdk(t, env, createKey(t, env.Client(t), "sdk", []client.Scope{client.ScopeLLM}, nil).Key)

	t.Run("New, Get and Delete", func(t *testing.T) {
		res, err := c.Responses.New(bg, responses.ResponseNewParams{
			Model:        "openai/gpt-4o-mini",
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")},
			Instructions: openai.String("Be brief."),
			Metadata:     map[string]string{"session": "s1"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.OutputText() != "Hello! How can I assist you today?" || res.Status != "completed" || res.Usage.TotalTokens != 29 ||
			res.Usage.InputTokensDetails.CachedTokens != 0 || res.Instructions.OfString != "Be brief." || res.Metadata["session"] != "s1" {
			t.Fatalf("%s", res.RawJSON())
		}
		got, err := c.Responses.Get(bg, res.ID, responses.ResponseGetParams{})
		if err != nil || got.ID != res.ID || got.OutputText() != res.OutputText() {
			t.Fatalf("get: %v %v", err, got)
		}
		if err := c.Responses.Delete(bg, res.ID); err != nil {
			t.Fatal(err)
		}
		_, err = c.Responses.Get(bg, res.ID, responses.ResponseGetParams{})
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != 404 {
			t.Errorf("get after delete: %v", err)
		}
	})
	t.Run("NewStreaming", func(t *testing.T) {
		stream := c.Responses.NewStreaming(bg, responses.ResponseNewParams{
			Model: "openai/gpt-4o-mini",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")},
		})
		var (
			deltas    strings.Builder
			types     []string
			completed *responses.Response
		)
		for stream.Next() {
			ev := stream.Current()
			types = append(types, ev.Type)
			switch ev.Type {
			case "response.output_text.delta":
				deltas.WriteString(ev.AsResponseOutputTextDelta().Delta)
			case "response.completed":
				r := ev.AsResponseCompleted().Response
				completed = &r
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if deltas.String() != "Hello! How can I help?" || completed == nil || completed.OutputText() != deltas.String() || completed.Usage.TotalTokens != 15 || types[0] != "response.created" {
			t.Fatalf("deltas %q, events %v, completed %+v", deltas.String(), types, completed)
		}
		if got, err := c.Responses.Get(bg, completed.ID, responses.ResponseGetParams{}); err != nil || got.OutputText() != deltas.String() {
			t.Errorf("stored stream: %v %v", err, got)
		}
	})
	t.Run("a tool loop with previous_response_id", func(t *testing.T) {
		params := responses.ResponseNewParams{
			Model: "openai/gpt-4o-mini",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Boston?")},
			Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_current_weather",
				map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}}, false)},
		}
		res, err := c.Responses.New(bg, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Output) != 1 || res.Output[0].Type != "function_call" {
			t.Fatalf("%s", res.RawJSON())
		}
		fc := res.Output[0].AsFunctionCall()
		if fc.CallID != "call_abc123" || fc.Name != "get_current_weather" || res.OutputText() != "" {
			t.Fatalf("function call %s", res.RawJSON())
		}
		params.PreviousResponseID = openai.String(res.ID)
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: openai.String(fc.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(`{"temperature":22}`)},
			}},
		}}
		if _, err := c.Responses.New(bg, params); err != nil {
			t.Fatal(err)
		}
		want := `user: Weather in Boston? | assistant: call call_abc123 get_current_weather | tool call_abc123: {"temperature":22}`
		if got := strings.Join(messages(up.last(t)), " | "); got != want {
			t.Errorf("upstream saw %s\nwant %s", got, want)
		}
	})
	t.Run("a refused field is an SDK error naming it", func(t *testing.T) {
		_, err := c.Responses.New(bg, responses.ResponseNewParams{
			Model:      "openai/gpt-4o-mini",
			Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")},
			Background: openai.Bool(true),
		})
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != 400 || e.Param != "background" || e.Type != "invalid_request_error" {
			t.Errorf("%v", err)
		}
	})
}
