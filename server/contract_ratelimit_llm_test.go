package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// tokenUpstream is an OpenAI-compatible upstream answering chat completions,
// streamed or not, with the usage it is told to report.
type tokenUpstream struct {
	srv        *httptest.Server
	prompt     atomic.Int64
	completion atomic.Int64
	calls      atomic.Int64
}

func newTokenUpstream(t *testing.T) *tokenUpstream {
	f := &tokenUpstream{}
	f.prompt.Store(10)
	f.completion.Store(20)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/chat/completions" {
			http.NotFound(w, r)
			return
		}
		f.calls.Add(1)
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		p, c := f.prompt.Load(), f.completion.Load()
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, p, c, p+c)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":%s}`, usage)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		chunk := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`
		for i, d := range []string{`{"role":"assistant","content":"hel"}`, `{"content":"lo"}`} {
			fin := "null"
			if i == 1 {
				fin = `"stop"`
			}
			fmt.Fprintf(w, "data: "+chunk+"\n\n", d, fin)
			fl.Flush()
		}
		fmt.Fprintf(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[],"usage":%s}`+"\n\n", usage)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func withTokenUpstream(f *tokenUpstream) servertest.Option {
	return func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{
			Name: "fake", Type: "openai", BaseURL: f.srv.URL,
			Models: []config.Model{{Name: "m", Capabilities: []string{"chat"}, MaxTokens: 1000}},
		})
	}
}

// chatStream runs a streamed /v1/chat to the end and returns the status,
// the headers and the SSE events' names.
func chatStream(t *testing.T, env *servertest.Env, key string, maxTokens int) (int, http.Header, []string, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"fake/m","messages":[{"role":"user","content":"hi"}],"maxTokens":%d,"stream":true}`, maxTokens)
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/v1/chat", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := env.HTTPClient(t, servertest.WithKey(key)).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, nil, string(b)
	}
	var events []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, ev)
		}
	}
	return res.StatusCode, res.Header, events, ""
}

// TestTokenLimit: with 100 tokens per minute and calls reserving 32
// (2 prompt + maxTokens 30) but using 30, three calls pass and the fourth
// is refused, streaming or not; the reservation is settled with the
// actual usage, and a stream that uses far more than it reserved is not
// cut off but charged in full.
func TestTokenLimit(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", streaming), func(t *testing.T) {
			up := newTokenUpstream(t)
			env := servertest.New(t, withLimits(0, 100), withTokenUpstream(up))
			admin := env.Client(t)
			key := createKey(t, admin, "llm", []client.Scope{client.ScopeLLM}, nil).Key
			other := createKey(t, admin, "other", []client.Scope{client.ScopeLLM}, nil).Key

			chat := func(key string, maxTokens int) (int, http.Header, string) {
				if streaming {
					st, h, events, errBody := chatStream(t, env, key, maxTokens)
					if st == http.StatusOK && (len(events) == 0 || events[len(events)-1] != "done") {
						t.Fatalf("stream events %v, want it to end with done", events)
					}
					return st, h, errBody
				}
				mt := maxTokens
				res, err := env.ClientWithKey(t, key).ChatWithResponse(bg, client.ChatRequest{
					Model: "fake/m", Messages: []client.Message{{Role: client.MessageRoleUser, Content: "hi"}}, MaxTokens: &mt,
				})
				if err != nil {
					t.Fatal(err)
				}
				return res.StatusCode(), res.HTTPResponse.Header, string(res.Body)
			}

			for i, wantRemaining := range []int{68, 38, 8} { // 100-32, then +2 back, -32 ...
				st, h, body := chat(key, 30)
				if st != http.StatusOK {
					t.Fatalf("call %d = %d %s", i, st, body)
				}
				if h.Get("X-RateLimit-Limit-Tokens") != "100" {
					t.Errorf("call %d X-RateLimit-Limit-Tokens = %q", i, h.Get("X-RateLimit-Limit-Tokens"))
				}
				// The refill (100/min) may add a token or two during the test.
				if got, _ := strconv.Atoi(h.Get("X-RateLimit-Remaining-Tokens")); got < wantRemaining || got > wantRemaining+2 {
					t.Errorf("call %d X-RateLimit-Remaining-Tokens = %d, want about %d", i, got, wantRemaining)
				}
			}
			calls := up.calls.Load()
			st, h, body := chat(key, 30)
			if st != http.StatusTooManyRequests || !strings.Contains(body, `"code":"rate_limited"`) || !strings.Contains(body, "tokensPerMinute") {
				t.Fatalf("fourth call = %d %s, want 429 rate_limited", st, body)
			}
			if ra, _ := strconv.Atoi(h.Get("Retry-After")); ra < 10 || ra > 14 {
				t.Errorf("Retry-After = %q, want about 13 s (22 tokens at 100/min)", h.Get("Retry-After"))
			}
			if up.calls.Load() != calls {
				t.Errorf("a refused call reached the upstream")
			}
			// Another credential has its own budget.
			if st, _, body := chat(other, 30); st != http.StatusOK {
				t.Fatalf("other key = %d %s", st, body)
			}
			// A call using far more than reserved runs to the end and is
			// charged in full: the other key is then in debt.
			up.completion.Store(500)
			if st, _, body := chat(other, 30); st != http.StatusOK {
				t.Fatalf("over-using call = %d %s", st, body)
			}
			up.completion.Store(20)
			st, h, body = chat(other, 1)
			if st != http.StatusTooManyRequests || h.Get("X-RateLimit-Remaining-Tokens") != "0" {
				t.Fatalf("after over-use = %d %s (remaining %q), want 429 with 0 left", st, body, h.Get("X-RateLimit-Remaining-Tokens"))
			}
		})
	}
}
