package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// BenchmarkLLMChat measures a chat call through the server's handler chain
// (middleware, auth, rate limiter, gateway, upstream round trip over
// loopback, usage accounting) against an instant upstream, without the
// caller's side of the network. native-budget is native with a key that has
// a spend budget (never reached), for the cost of budget enforcement;
// responses is /openai/v1/responses keeping each response (queued, written
// by the background flusher), responses-store-false the translation alone. bench/llm.sh measures the whole thing end to
// end with wrk and vegeta on a pinned core.
func BenchmarkLLMChat(b *testing.B) {
	reply := []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the benchmark upstream."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	}))
	defer up.Close()
	env := benchServer(b, up.URL)
	_, budgetKey, err := env.Server.Keys().Create(context.Background(), auth.NewAPIKeyInput{Name: "bench-budget", Scopes: []string{auth.ScopeLLM},
		Policy: auth.Policy{Budget: &auth.Budget{USD: 1e9, Period: auth.PeriodMonth, AlertAt: []float64{0.5}}}})
	if err != nil {
		b.Fatal(err)
	}
	native := `{"model":"mock/bench","messages":[{"role":"user","content":"Say hello in five words."}],"maxTokens":32}`
	for _, tc := range []struct{ name, path, body, key string }{
		{"native", "/v1/chat", native, env.AdminKey},
		{"native-budget", "/v1/chat", native, budgetKey},
		{"openai", "/openai/v1/chat/completions", `{"model":"mock/bench","messages":[{"role":"user","content":"Say hello in five words."}],"max_tokens":32}`, env.AdminKey},
		{"responses-store-false", "/openai/v1/responses", `{"model":"mock/bench","input":"Say hello in five words.","max_output_tokens":32,"store":false}`, env.AdminKey},
		{"responses", "/openai/v1/responses", `{"model":"mock/bench","input":"Say hello in five words.","max_output_tokens":32}`, env.AdminKey},
		{"anthropic", "/anthropic/v1/messages", `{"model":"mock/bench","messages":[{"role":"user","content":"Say hello in five words."}],"max_tokens":32}`, env.AdminKey},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			b.ReportAllocs()
			for b.Loop() {
				w := benchPost(env, tc.path, body, tc.key)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

// BenchmarkLLMStream measures one streamed chat through the server's
// handler chain against an upstream that sends a role chunk, 20 content
// chunks (each flushed on its own), a finish chunk, a usage chunk and
// [DONE] at once, as bench/mockllm does without its pauses: an op is a
// whole stream, read to its end. Divide by 20 for a chunk. bench/stream.sh
// measures 2,000 of them open at once, end to end.
func BenchmarkLLMStream(b *testing.B) {
	const chunks = 20
	head := `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench","system_fingerprint":null,"choices":`
	var events [][]byte
	ev := func(choices string) { events = append(events, []byte(head+choices+`,"usage":null}`+"\n\n")) }
	ev(`[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`)
	for i := range chunks {
		ev(`[{"index":0,"delta":{"content":"tok` + strconv.Itoa(i) + ` "},"logprobs":null,"finish_reason":null}]`)
	}
	ev(`[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`)
	events = append(events, []byte(head+`[],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}}`+"\n\n"), []byte("data: [DONE]\n\n"))
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			_, _ = w.Write(e)
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	env := benchServer(b, up.URL)
	for _, tc := range []struct{ name, path, body, last string }{
		{"native", "/v1/chat", `{"model":"mock/bench","messages":[{"role":"user","content":"Count to twenty."}],"stream":true}`, "event: done"},
		{"openai", "/openai/v1/chat/completions", `{"model":"mock/bench","messages":[{"role":"user","content":"Count to twenty."}],"stream":true,"stream_options":{"include_usage":true}}`, "data: [DONE]"},
		{"responses", "/openai/v1/responses", `{"model":"mock/bench","input":"Count to twenty.","stream":true,"store":false}`, "response.completed"},
		{"anthropic", "/anthropic/v1/messages", `{"model":"mock/bench","messages":[{"role":"user","content":"Count to twenty."}],"max_tokens":64,"stream":true}`, "message_stop"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			b.ReportAllocs()
			for b.Loop() {
				w := benchPost(env, tc.path, body, env.AdminKey)
				if w.Code != 200 || !bytes.Contains(w.Body.Bytes(), []byte(tc.last)) || !bytes.Contains(w.Body.Bytes(), []byte("tok19 ")) {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

// benchServer is a server whose provider "mock" (type openai, model
// "bench") is the upstream at upURL, with limits the benchmarks never reach.
func benchServer(b *testing.B, upURL string) *servertest.Env {
	return servertest.New(b, func(c *config.Config) {
		c.Limits.RequestsPerMinute = 1 << 30
		c.Limits.TokensPerMinute = 1 << 40
		c.Providers = []config.Provider{{Name: "mock", Type: "openai", BaseURL: upURL + "/v1", Timeout: config.Duration(10 * time.Second),
			Models: []config.Model{{Name: "bench", Capabilities: []string{"chat"}, MaxTokens: 8192, Pricing: &config.Pricing{Input: 0.15, Output: 0.6}}}}}
	})
}

// benchPost posts the JSON body to path with key through the server's
// handler, without a network on the caller's side.
func benchPost(env *servertest.Env, path string, body []byte, key string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	env.Server.ServeHTTP(w, req)
	return w
}
