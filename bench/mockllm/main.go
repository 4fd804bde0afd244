// Command mockllm is a fast OpenAI-compatible upstream for benchmarks
// (bench/llm.sh): it answers every chat completion at once with the same
// small completion and usage, so that what a benchmark measures is the
// gateway in front of it. GET /api/ping is a connector upstream for
// action runs (bench/cluster.sh).
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"time"
)

// completion is OpenAI's chat completion shape, with usage.
var completion = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the benchmark upstream.","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}`)

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "listen address")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(completion)
	})
	mux.HandleFunc("GET /api/ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
