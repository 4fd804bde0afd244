// Command mockllm is a fast OpenAI-compatible upstream for benchmarks
// (bench/llm.sh, bench/stream.sh): it answers every chat completion at
// once with the same small completion and usage, so that what a benchmark
// measures is the gateway in front of it. A request with "stream": true is
// answered in OpenAI's SSE format: a role chunk, -chunks content chunks
// -interval apart (the first at once), a finish chunk, a usage chunk when
// stream_options.include_usage asks for one, and [DONE]. POST
// /v1/responses answers a Responses API call the same way as a chat
// completion, for a gateway that passes /responses through. GET /api/ping
// is a connector upstream for action runs (bench/cluster.sh).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// completion is OpenAI's chat completion shape, with usage.
var completion = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the benchmark upstream.","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}`)

// response is OpenAI's Responses API response shape, with usage.
var response = []byte(`{"id":"resp_bench","object":"response","created_at":1700000000,"status":"completed","error":null,"incomplete_details":null,` +
	`"instructions":null,"max_output_tokens":null,"model":"bench","parallel_tool_calls":true,"previous_response_id":null,"store":false,` +
	`"temperature":1.0,"top_p":1.0,"tool_choice":"auto","tools":[],"text":{"format":{"type":"text"}},"reasoning":{"effort":null,"summary":null},"truncation":"disabled",` +
	`"output":[{"type":"message","id":"msg_bench","status":"completed","role":"assistant",` +
	`"content":[{"type":"output_text","text":"Hello from the benchmark upstream.","annotations":[]}]}],` +
	`"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":8,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":20},"metadata":{}}`)

// streamParams are the fields of a chat request that decide how it is
// answered.
type streamParams struct {
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// streamer writes chat completion chunks in OpenAI's SSE format.
type streamer struct {
	chunks   int
	interval time.Duration
	// Events, each "data: ...\n\n": role (with and without the usage
	// field that include_usage adds), one per content chunk (likewise),
	// finish (likewise), usage.
	role, roleU       []byte
	content, contentU [][]byte
	finish, finishU   []byte
	usage             []byte
}

// chunkHead is the start of every chunk object.
const chunkHead = `{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench","system_fingerprint":null,"choices":`

func newStreamer(chunks int, interval time.Duration) *streamer {
	ev := func(choices string, usage bool) []byte {
		s := "data: " + chunkHead + choices
		if usage {
			s += `,"usage":null`
		}
		return []byte(s + "}\n\n")
	}
	choice := func(delta, finish string) string {
		return `[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]`
	}
	s := &streamer{chunks: chunks, interval: interval}
	role := choice(`{"role":"assistant","content":"","refusal":null}`, "null")
	s.role, s.roleU = ev(role, false), ev(role, true)
	for i := range chunks {
		c := choice(`{"content":"tok`+strconv.Itoa(i)+` "}`, "null")
		s.content = append(s.content, ev(c, false))
		s.contentU = append(s.contentU, ev(c, true))
	}
	fin := choice(`{}`, `"stop"`)
	s.finish, s.finishU = ev(fin, false), ev(fin, true)
	s.usage = []byte("data: " + chunkHead + `[],"usage":{"prompt_tokens":12,"completion_tokens":` + strconv.Itoa(chunks) +
		`,"total_tokens":` + strconv.Itoa(12+chunks) + `,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}` + "\n\n")
	return s
}

// serve streams one completion; it stops early when the client goes away.
func (s *streamer) serve(w http.ResponseWriter, r *http.Request, includeUsage bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	role, content, finish := s.role, s.content, s.finish
	if includeUsage {
		role, content, finish = s.roleU, s.contentU, s.finishU
	}
	if _, err := w.Write(role); err != nil {
		return
	}
	start := time.Now()
	var t *time.Timer
	for i, c := range content {
		if i > 0 {
			// Chunk i is due i intervals after the first, however late the
			// ones before it were written.
			d := time.Until(start.Add(time.Duration(i) * s.interval))
			if t == nil {
				t = time.NewTimer(d)
			} else {
				t.Reset(d)
			}
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		if _, err := w.Write(c); err != nil {
			return
		}
		fl.Flush()
	}
	if t != nil {
		t.Stop()
	}
	_, _ = w.Write(finish)
	if includeUsage {
		_, _ = w.Write(s.usage)
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	fl.Flush()
}

var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "listen address")
	chunks := flag.Int("chunks", 20, "content chunks in a streamed chat completion")
	interval := flag.Duration("interval", 50*time.Millisecond, "time between a streamed completion's content chunks")
	flag.Parse()
	if *chunks < 1 || *interval < 0 {
		log.Fatal("-chunks must be at least 1 and -interval not negative")
	}
	st := newStreamer(*chunks, *interval)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		b := bufs.Get().(*bytes.Buffer)
		defer bufs.Put(b)
		b.Reset()
		if _, err := b.ReadFrom(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// Only a body that mentions "stream" is decoded: the plain
		// completion stays as cheap as it was.
		if bytes.Contains(b.Bytes(), []byte(`"stream"`)) {
			var p streamParams
			if err := json.Unmarshal(b.Bytes(), &p); err != nil {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","param":null,"code":null}}`, err.Error())
				return
			}
			if p.Stream {
				st.serve(w, r, p.StreamOptions != nil && p.StreamOptions.IncludeUsage)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(completion)
	})
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(response)
	})
	mux.HandleFunc("GET /api/ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
