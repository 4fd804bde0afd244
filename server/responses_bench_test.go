package server_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// BenchmarkResponses measures POST /openai/v1/responses through the
// server's handler chain against an instant upstream, beside the same call
// on /openai/v1/chat/completions: store:false is the translation alone,
// store:true adds keeping the response (queued in memory, written by the
// background flusher). Run: go test ./server/ -run '^$' -bench BenchmarkResponses
func BenchmarkResponses(b *testing.B) {
	reply := []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the benchmark upstream."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	}))
	defer up.Close()
	env := servertest.New(b, func(c *config.Config) {
		c.Limits.RequestsPerMinute = 1 << 30
		c.Limits.TokensPerMinute = 1 << 40
		c.Providers = []config.Provider{{Name: "mock", Type: "openai", BaseURL: up.URL + "/v1", Timeout: config.Duration(10 * time.Second),
			Models: []config.Model{{Name: "bench", Capabilities: []string{"chat"}, MaxTokens: 8192, Pricing: &config.Pricing{Input: 0.15, Output: 0.6}}}}}
	})
	for _, tc := range []struct{ name, path, body string }{
		{"chat-completions", "/openai/v1/chat/completions", `{"model":"mock/bench","messages":[{"role":"user","content":"Say hello in five words."}],"max_tokens":32}`},
		{"responses-store-false", "/openai/v1/responses", `{"model":"mock/bench","input":"Say hello in five words.","max_output_tokens":32,"store":false}`},
		{"responses-store-true", "/openai/v1/responses", `{"model":"mock/bench","input":"Say hello in five words.","max_output_tokens":32}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, tc.path, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+env.AdminKey)
				w := httptest.NewRecorder()
				env.Server.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
