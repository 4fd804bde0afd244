package server_test

import (
	"bytes"
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

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks/webhooktest"
)

// switchUpstream is an OpenAI-compatible upstream that fails with 500 on
// demand and lists the models it is told to (discovery).
type switchUpstream struct {
	*httptest.Server
	failing atomic.Bool
	calls   atomic.Int32 // chat calls received

	mu     sync.Mutex
	models []string
}

func newSwitchUpstream(t *testing.T) *switchUpstream {
	u := &switchUpstream{}
	chat := llmFixture(t, "openai/chat_completion.json")
	stream := llmFixture(t, "openai/chat_stream.txt")
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			u.mu.Lock()
			var data []map[string]any
			for _, m := range u.models {
				data = append(data, map[string]any{"id": m, "object": "model", "created": 1700000000, "owned_by": "test"})
			}
			u.mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
			return
		}
		u.calls.Add(1)
		if u.failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
			return
		}
		var body struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(stream)
			return
		}
		_, _ = w.Write(chat)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *switchUpstream) setModels(ms ...string) {
	u.mu.Lock()
	u.models = ms
	u.mu.Unlock()
}

// testClock is a clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// eventsEnv is a server with two providers, `flaky` (its breaker opens
// after 3 failures for 30 s) and `backup`, a discovering provider `disc`,
// a webhook receiver subscribed to every model event but the opt-in one,
// and a second receiver listing only llm.request.completed.
type eventsEnv struct {
	env            *servertest.Env
	flaky, backup  *switchUpstream
	disc           *switchUpstream
	events, opt    *webhooktest.Receiver
	key, keyID     string
	clock          *testClock
	receiverEvents []string
}

func newEventsEnv(t *testing.T, opts ...servertest.Option) *eventsEnv {
	e := &eventsEnv{flaky: newSwitchUpstream(t), backup: newSwitchUpstream(t), disc: newSwitchUpstream(t)}
	e.disc.setModels("alpha", "beta")
	chat := func(name string, fallbacks ...string) config.Model {
		return config.Model{Name: name, Capabilities: []string{"chat"}, MaxTokens: 4096, Pricing: &config.Pricing{Input: 1, Output: 2}, Fallbacks: fallbacks}
	}
	opts = append([]servertest.Option{webhooktest.FastConfig(3, 10*time.Millisecond), func(c *config.Config) {
		c.Providers = []config.Provider{
			{Name: "flaky", Type: "openai", BaseURL: e.flaky.URL + "/v1", Timeout: config.Duration(5 * time.Second),
				CircuitBreaker: config.CircuitBreaker{Threshold: 3, Cooldown: config.Duration(30 * time.Second)},
				Models:         []config.Model{chat("main", "backup/spare"), chat("solo")}},
			{Name: "backup", Type: "openai", BaseURL: e.backup.URL + "/v1", Timeout: config.Duration(5 * time.Second),
				Models: []config.Model{chat("spare")}},
			{Name: "disc", Type: "openai", BaseURL: e.disc.URL + "/v1", Discover: true},
		}
	}}, opts...)
	e.env = servertest.New(t, opts...)
	e.clock = &testClock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	e.env.Server.LLM().Breakers.SetClock(e.clock.Now)
	c := e.env.Client(t)
	e.events, e.opt = webhooktest.New(t), webhooktest.New(t)
	w := createWebhook(t, c, client.WebhookCreate{Url: e.events.URL(), Events: []string{"*"}})
	e.events.Expect(w.Secret)
	w2 := createWebhook(t, c, client.WebhookCreate{Url: e.opt.URL(), Events: []string{"llm.request.completed"}})
	e.opt.Expect(w2.Secret)
	k := createKey(t, c, "app", []client.Scope{client.ScopeLLM}, nil)
	e.key, e.keyID = k.Key, k.Id
	return e
}

// chat sends POST /v1/chat for model and returns status, headers and body.
func (e *eventsEnv) chat(t *testing.T, model, prompt string) (int, http.Header, []byte) {
	t.Helper()
	return e.post(t, map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": prompt}}})
}

func (e *eventsEnv) post(t *testing.T, in map[string]any) (int, http.Header, []byte) {
	t.Helper()
	body, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, e.env.URL+"/v1/chat", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := e.env.HTTPClient(t, servertest.WithKey(e.key)).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

// received flushes the event queue and waits until rcv holds n events of
// type typ; it returns their data.
func received(t *testing.T, env *servertest.Env, rcv *webhooktest.Receiver, typ string, n int) []map[string]any {
	t.Helper()
	if err := env.Server.EventQueue().Flush(bg); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	webhooktest.WaitFor(t, fmt.Sprintf("%d %s event(s)", n, typ), 30*time.Second, func() bool {
		out = out[:0]
		for _, r := range rcv.Delivered() {
			if r.Event.Type == typ {
				var d map[string]any
				if err := json.Unmarshal(r.Event.Data, &d); err != nil {
					t.Fatal(err)
				}
				out = append(out, d)
			}
		}
		return len(out) >= n
	})
	rcv.CheckClean(t)
	return out
}

// countOf flushes and counts the events of typ recorded in the event log.
func countOf(t *testing.T, env *servertest.Env, typ string) int {
	t.Helper()
	if err := env.Server.EventQueue().Flush(bg); err != nil {
		t.Fatal(err)
	}
	et := client.EventType(typ)
	res, err := env.Client(t).ListEventsWithResponse(bg, &client.ListEventsParams{Type: &et})
	if err != nil {
		t.Fatal(err)
	}
	if res.JSON200 == nil {
		t.Fatalf("list events = %d %s", res.StatusCode(), res.Body)
	}
	return len(res.JSON200.Data)
}

func TestContractLLMEvents_FallbackUsed(t *testing.T) {
	e := newEventsEnv(t)
	e.flaky.failing.Store(true)
	status, h, body := e.chat(t, "flaky/main", "Hi")
	if status != http.StatusOK || !strings.Contains(string(body), `"model":"backup/spare"`) {
		t.Fatalf("chat = %d %s, want 200 from backup/spare", status, body)
	}
	got := received(t, e.env, e.events, "llm.fallback_used", 1)
	want := map[string]any{
		"requestId": h.Get("X-Request-Id"), "key": e.keyID, "requestedModel": "flaky/main", "model": "backup/spare", "succeeded": true,
		"failed": []any{map[string]any{"model": "flaky/main", "code": "upstream_error"}},
	}
	if js(got[0]) != js(want) {
		t.Errorf("llm.fallback_used data = %s\nwant %s", js(got[0]), js(want))
	}
}

func TestContractLLMEvents_CircuitBreaker(t *testing.T) {
	e := newEventsEnv(t)
	e.flaky.failing.Store(true)
	for i := range 3 {
		if status, _, body := e.chat(t, "flaky/main", "Hi"); status != http.StatusOK {
			t.Fatalf("call %d = %d %s, want 200 from the fallback", i, status, body)
		}
	}
	opened := e.clock.Now()
	got := received(t, e.env, e.events, "llm.provider_unhealthy", 1)
	want := map[string]any{"provider": "flaky", "failures": 3.0, "lastErrorCode": "upstream_error", "retryAt": opened.Add(30 * time.Second).Format(time.RFC3339)}
	if js(got[0]) != js(want) {
		t.Errorf("llm.provider_unhealthy data = %s\nwant %s", js(got[0]), js(want))
	}
	callsWhenOpened := e.flaky.calls.Load()

	t.Run("while open the provider is skipped and its fallbacks answer", func(t *testing.T) {
		status, _, body := e.chat(t, "flaky/main", "Hi")
		if status != http.StatusOK || !strings.Contains(string(body), `"model":"backup/spare"`) {
			t.Fatalf("chat = %d %s, want 200 from backup/spare", status, body)
		}
		if n := e.flaky.calls.Load(); n != callsWhenOpened {
			t.Errorf("the open provider received %d more calls", n-callsWhenOpened)
		}
	})
	t.Run("without a fallback the call fails fast with 503 and Retry-After", func(t *testing.T) {
		e.clock.Add(10 * time.Second)
		status, h, body := e.chat(t, "flaky/solo", "Hi")
		if status != http.StatusServiceUnavailable || whErrorCode(t, body) != "unavailable" || !strings.Contains(string(body), `provider \"flaky\"`) {
			t.Fatalf("chat = %d %s, want 503 unavailable naming the provider", status, body)
		}
		if got := h.Get("Retry-After"); got != "20" {
			t.Errorf("Retry-After = %q, want 20 (the seconds until the trial)", got)
		}
		if n := e.flaky.calls.Load(); n != callsWhenOpened {
			t.Errorf("the open provider received %d more calls", n-callsWhenOpened)
		}
	})
	t.Run("after the cooldown a successful trial closes it", func(t *testing.T) {
		e.flaky.failing.Store(false)
		e.clock.Add(20 * time.Second)
		status, _, body := e.chat(t, "flaky/main", "Hi")
		if status != http.StatusOK || !strings.Contains(string(body), `"model":"flaky/main"`) {
			t.Fatalf("chat = %d %s, want 200 from flaky/main", status, body)
		}
		got := received(t, e.env, e.events, "llm.provider_recovered", 1)
		if js(got[0]) != js(map[string]any{"provider": "flaky", "downForMs": 30000.0}) {
			t.Errorf("llm.provider_recovered data = %s", js(got[0]))
		}
	})
	if n := countOf(t, e.env, "llm.provider_unhealthy"); n != 1 {
		t.Errorf("%d llm.provider_unhealthy events, want 1", n)
	}
}

func TestContractLLMEvents_ModelsChanged(t *testing.T) {
	e := newEventsEnv(t)
	cat := e.env.Server.LLM().Catalog
	webhooktest.WaitFor(t, "the first discovery", 30*time.Second, func() bool {
		_, err := cat.Lookup("disc/alpha")
		return err == nil
	})
	if err := cat.Refresh(bg); err != nil { // nothing changed
		t.Fatal(err)
	}
	e.disc.setModels("beta", "gamma", "delta")
	if err := cat.Refresh(bg); err != nil {
		t.Fatal(err)
	}
	got := received(t, e.env, e.events, "llm.models_changed", 1)
	want := map[string]any{"provider": "disc", "added": []any{"disc/delta", "disc/gamma"}, "removed": []any{"disc/alpha"}}
	if js(got[0]) != js(want) {
		t.Errorf("llm.models_changed data = %s\nwant %s", js(got[0]), js(want))
	}
	if n := countOf(t, e.env, "llm.models_changed"); n != 1 {
		t.Errorf("%d llm.models_changed events, want 1 (none for the first discovery, none for an unchanged list)", n)
	}
}

func TestContractLLMEvents_RateLimitExceededOncePerMinute(t *testing.T) {
	e := newEventsEnv(t, withLimits(2, 0))
	first := time.Now()
	refused := 0
	for range 12 {
		if status, _, _ := e.chat(t, "backup/spare", "Hi"); status == http.StatusTooManyRequests {
			refused++
		}
	}
	minutes := int(time.Now().Unix()/60-first.Unix()/60) + 1
	if refused < 10 {
		t.Fatalf("%d refusals, want at least 10", refused)
	}
	got := received(t, e.env, e.events, "ratelimit.exceeded", 1)
	want := map[string]any{"key": e.keyID, "keyKind": "api_key", "limit": "requestsPerMinute", "plane": "data", "limitPerMinute": 2.0}
	for k, v := range want {
		if got[0][k] != v {
			t.Errorf("ratelimit.exceeded data[%s] = %v, want %v (%s)", k, got[0][k], v, js(got[0]))
		}
	}
	if s, _ := got[0]["retryAfterSeconds"].(float64); s < 1 {
		t.Errorf("retryAfterSeconds = %v, want at least 1", got[0]["retryAfterSeconds"])
	}
	if n := countOf(t, e.env, "ratelimit.exceeded"); n > minutes {
		t.Errorf("%d ratelimit.exceeded events for %d refusals within %d minute(s), want at most one per minute", n, refused, minutes)
	}
}

func TestContractLLMEvents_RequestCompletedOnlyToItsSubscriber(t *testing.T) {
	e := newEventsEnv(t)
	const prompt = "my-very-private-prompt-text"
	status, h, body := e.chat(t, "backup/spare", prompt)
	if status != http.StatusOK {
		t.Fatalf("chat = %d %s", status, body)
	}
	var res struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	}
	_ = json.Unmarshal(body, &res)
	e.flaky.failing.Store(true)
	if status, _, body := e.chat(t, "flaky/solo", prompt); status != http.StatusBadGateway {
		t.Fatalf("chat = %d %s, want 502", status, body)
	}
	status, _, body = e.post(t, map[string]any{"model": "backup/spare", "stream": true, "messages": []map[string]string{{"role": "user", "content": prompt}}})
	if status != http.StatusOK {
		t.Fatalf("stream = %d %s", status, body)
	}
	got := received(t, e.env, e.opt, "llm.request.completed", 3)
	var ok, failed, streamed map[string]any
	for _, d := range got {
		switch {
		case d["stream"] == true:
			streamed = d
		case d["status"] == "succeeded":
			ok = d
		default:
			failed = d
		}
	}
	if ok == nil || failed == nil || streamed == nil {
		t.Fatalf("want one succeeded, one failed and one streamed event, got %s", js(got))
	}
	if streamed["status"] != "succeeded" || streamed["totalTokens"].(float64) == 0 {
		t.Errorf("streamed event = %s", js(streamed))
	}
	want := map[string]any{"requestId": h.Get("X-Request-Id"), "key": e.keyID, "model": "backup/spare", "requestedModel": "backup/spare",
		"operation": "chat", "stream": false, "status": "succeeded"}
	for k, v := range want {
		if ok[k] != v {
			t.Errorf("succeeded event data[%s] = %v, want %v", k, ok[k], v)
		}
	}
	if ok["totalTokens"].(float64) != ok["promptTokens"].(float64)+ok["completionTokens"].(float64) || ok["totalTokens"].(float64) == 0 {
		t.Errorf("token counts in %s", js(ok))
	}
	if _, has := ok["costUsd"]; !has {
		t.Errorf("no costUsd in %s", js(ok))
	}
	if _, has := ok["latencyMs"]; !has {
		t.Errorf("no latencyMs in %s", js(ok))
	}
	if failed["errorCode"] != "upstream_error" || failed["model"] != "flaky/solo" {
		t.Errorf("failed event = %s", js(failed))
	}
	for _, r := range e.opt.Received() {
		if strings.Contains(string(r.Body), prompt) || (res.Message.Content != "" && strings.Contains(string(r.Body), res.Message.Content)) {
			t.Errorf("an event carries the prompt or the output: %s", r.Body)
		}
	}
	for _, r := range e.events.Received() {
		if r.Event.Type == "llm.request.completed" {
			t.Errorf("the \"*\" webhook received the opt-in llm.request.completed")
		}
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
