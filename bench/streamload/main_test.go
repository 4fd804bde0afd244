package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// openAIStream is a chat completion stream as OpenAI sends it with
// include_usage: a role chunk, n content chunks, a finish chunk, a usage
// chunk and [DONE].
func openAIStream(n int) []string {
	head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":`
	ev := []string{head + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`}
	for i := range n {
		ev = append(ev, head+fmt.Sprintf(`[{"index":0,"delta":{"content":"t%d "},"finish_reason":null}],"usage":null}`, i))
	}
	ev = append(ev, head+`[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
		head+fmt.Sprintf(`[],"usage":{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d}}`, n, n+3), "[DONE]")
	return ev
}

// sse writes events as SSE data lines.
func sse(events []string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

func TestRun_ChecksTheStreamToItsEnd(t *testing.T) {
	good := openAIStream(3)
	tests := []struct {
		name   string
		status int
		ctype  string
		body   string
		want   string // substring of the failure; "" when the stream passes
	}{
		{name: "complete stream passes", body: sse(good)},
		{name: "keep-alive comments and CRLF are read", body: ": keep-alive\r\n\r\n" + strings.ReplaceAll(sse(good), "\n", "\r\n")},
		{name: "missing content chunk", body: sse(append(good[:1:1], good[2:]...)), want: "2 content chunks, want 3"},
		{name: "no [DONE]", body: sse(good[:len(good)-1]), want: "without [DONE]"},
		{name: "no usage chunk", body: sse(append(good[:5:5], good[6:]...)), want: "no usage chunk"},
		{name: "wrong usage", body: sse(append(good[:5:5], strings.Replace(good[5], `"completion_tokens":3`, `"completion_tokens":2`, 1), "[DONE]")), want: "completion_tokens 2, want 3"},
		{name: "error event", body: sse([]string{good[0], `{"error":{"message":"upstream failed","type":"api_error"}}`}), want: "an error event"},
		{name: "data after [DONE]", body: sse(append(append([]string{}, good...), good[1])), want: "data after [DONE]"},
		{name: "not JSON", body: sse([]string{good[0], "{"}), want: "not JSON"},
		{name: "refused", status: http.StatusTooManyRequests, ctype: "application/json", body: `{"error":{"message":"slow down"}}`, want: "status 429"},
		{name: "not an event stream", ctype: "application/json", body: `{}`, want: "not text/event-stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer k" {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				ct := tt.ctype
				if ct == "" {
					ct = "text/event-stream"
				}
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(max(tt.status, http.StatusOK))
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			s := &streamer{client: srv.Client(), url: srv.URL, key: "k", body: []byte(`{}`), chunks: 3, timeout: 5 * time.Second}
			o := s.run(context.Background())
			if tt.want == "" {
				if o.Err != "" || o.TTFT <= 0 || o.TTFT > o.Duration {
					t.Fatalf("run = %+v, want a passing stream with 0 < TTFT <= duration", o)
				}
				return
			}
			if !strings.Contains(o.Err, tt.want) {
				t.Fatalf("run failure = %q, want one containing %q", o.Err, tt.want)
			}
		})
	}
}

func TestRun_NoFinishReasonFails(t *testing.T) {
	ev := openAIStream(2)
	ev[3] = strings.Replace(ev[3], `"finish_reason":"stop"`, `"finish_reason":null`, 1)
	o, err := (&streamer{chunks: 2}).read(strings.NewReader(sse(ev)), time.Now())
	if err == nil || !strings.Contains(err.Error(), "no finish_reason") {
		t.Fatalf("read = %+v, %v; want the missing finish_reason named", o, err)
	}
}

func TestRun_TTFTIsTheFirstContentNotTheRoleChunk(t *testing.T) {
	ev := openAIStream(2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(sse(ev[:1])))
		w.(http.Flusher).Flush()
		time.Sleep(100 * time.Millisecond)
		_, _ = w.Write([]byte(sse(ev[1:])))
	}))
	defer srv.Close()
	o := (&streamer{client: srv.Client(), url: srv.URL, body: []byte(`{}`), chunks: 2, timeout: 5 * time.Second}).run(context.Background())
	if o.Err != "" || o.TTFT < 100*time.Millisecond {
		t.Fatalf("run = %+v, want TTFT of at least 100ms (the role chunk carries no content)", o)
	}
}

func TestWave_SpreadsStartsAndCountsPeakOpen(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if arrived.Add(1) == 8 {
			close(release)
		}
		<-release // every stream stays open until all 8 are
		_, _ = w.Write([]byte(sse(openAIStream(1))))
	}))
	defer srv.Close()
	s := &streamer{client: srv.Client(), url: srv.URL, body: []byte(`{}`), chunks: 1, timeout: 5 * time.Second}
	var open, peak atomic.Int64
	var called atomic.Int32
	outs, wall := s.wave(context.Background(), 8, 80*time.Millisecond, &open, &peak, func() { called.Add(1) })
	for i, o := range outs {
		if o.Err != "" {
			t.Fatalf("stream %d: %s", i, o.Err)
		}
	}
	if peak.Load() != 8 || open.Load() != 0 {
		t.Fatalf("peak %d, open after %d; want 8 and 0", peak.Load(), open.Load())
	}
	if called.Load() != 1 {
		t.Fatalf("allOpen called %d times, want once", called.Load())
	}
	if wall < 70*time.Millisecond {
		t.Fatalf("wave took %v, want the starts spread over 80ms", wall)
	}
}

func TestQuantilesOf_NearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	q := quantilesOf(ds)
	if q != (quantiles{N: 100, P50: 50, P90: 90, P99: 99, Max: 100}) {
		t.Fatalf("quantilesOf(1..100 ms) = %+v", q)
	}
	if quantilesOf(nil) != (quantiles{}) {
		t.Fatal("quantilesOf(nil) is not zero")
	}
}

func TestMemory_ReadsThisProcess(t *testing.T) {
	rss, hwm, err := memory(os.Getpid())
	if err != nil || rss <= 0 || hwm < rss {
		t.Fatalf("memory(self) = %d, %d, %v; want 0 < VmRSS <= VmHWM", rss, hwm, err)
	}
}

func TestCPUTime_ReadsThisProcess(t *testing.T) {
	for t0 := time.Now(); time.Since(t0) < 50*time.Millisecond; { // burn some CPU
	}
	d, err := cpuTime(os.Getpid())
	if err != nil || d <= 0 {
		t.Fatalf("cpuTime(self) = %v, %v; want a positive CPU time", d, err)
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(sse(openAIStream(2))))
	f.Add([]byte("data: [DONE]\n\ndata: x\n"))
	f.Add([]byte(": c\r\ndata:{\"object\":\"chat.completion.chunk\"}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := (&streamer{chunks: 2}).read(bytes.NewReader(b), time.Now())
		if err == nil && bytes.Count(b, []byte(`"content"`)) < 2 {
			t.Fatalf("a stream with fewer than 2 content fields passed: %+v", o)
		}
	})
}
