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

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

// spendUpstream is an OpenAI-compatible upstream (OpenAI's exact wire
// format) reporting the usage it is told to, cached prompt tokens
// included. A gated stream sends its first chunk, signals arrived and
// waits for release before it finishes.
type spendUpstream struct {
	srv                        *httptest.Server
	prompt, cached, completion atomic.Int64
	calls                      atomic.Int64
	gate                       atomic.Bool
	arrived                    chan struct{}
	release                    chan struct{}
}

func newSpendUpstream(t *testing.T) *spendUpstream {
	f := &spendUpstream{arrived: make(chan struct{}, 64), release: make(chan struct{})}
	f.prompt.Store(1000)
	f.cached.Store(400)
	f.completion.Store(500)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		var req struct {
			Model  string          `json:"model"`
			Stream bool            `json:"stream"`
			Input  json.RawMessage `json:"input"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		p, c, done := f.prompt.Load(), f.cached.Load(), f.completion.Load()
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`, p, done, p+done, c)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/embeddings":
			// Embedding usage is prompt tokens only.
			fmt.Fprintf(w, `{"object":"list","model":%q,"data":[{"object":"embedding","index":0,"embedding":[0.5,-0.25,1]}],"usage":{"prompt_tokens":%d,"total_tokens":%d}}`, req.Model, p, p)
		case r.URL.Path != "/chat/completions":
			http.NotFound(w, r)
		case !req.Stream:
			fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":%s}`, usage)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fl := w.(http.Flusher)
			chunk := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}` + "\n\n"
			fmt.Fprintf(w, chunk, `{"role":"assistant","content":"hel"}`, "null")
			fl.Flush()
			if f.gate.Load() {
				f.arrived <- struct{}{}
				select {
				case <-f.release:
				case <-r.Context().Done():
					return
				}
			}
			fmt.Fprintf(w, chunk, `{"content":"lo"}`, `"stop"`)
			fmt.Fprintf(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[],"usage":%s}`+"\n\n", usage)
			fmt.Fprint(w, "data: [DONE]\n\n")
			fl.Flush()
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// callCost is the cost of one call at the upstream's default usage:
// 600 uncached prompt tokens at $1/M, 400 cached at $0.50/M and 500
// completion tokens at $2/M.
const callCost = (600*1 + 400*0.5 + 500*2) / 1e6

// budgetEnv starts a server whose provider "fake" is up, with a chat model
// m and an embedding model e, and the budget tracker's clock at now.
func budgetEnv(t *testing.T, up *spendUpstream, now *atomic.Pointer[time.Time], opts ...servertest.Option) *servertest.Env {
	cached := 0.5
	opts = append([]servertest.Option{withLimits(0, 0), func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{
			Name: "fake", Type: "openai", BaseURL: up.srv.URL, Timeout: config.Duration(10 * time.Second),
			Models: []config.Model{
				{Name: "m", Capabilities: []string{"chat"}, MaxTokens: 8192, Pricing: &config.Pricing{Input: 1, Output: 2, CachedInput: &cached}},
				{Name: "e", Capabilities: []string{"embeddings"}, Dimensions: 3, Pricing: &config.Pricing{Input: 1.8}},
			},
		})
	}}, opts...)
	env := servertest.New(t, opts...)
	if now != nil {
		env.Server.Budget().Now = func() time.Time { return *now.Load() }
	}
	return env
}

func clockAt(s string) *atomic.Pointer[time.Time] {
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	var p atomic.Pointer[time.Time]
	p.Store(&tm)
	return &p
}

// budgetKey creates an llm key with a budget.
func budgetKey(t *testing.T, env *servertest.Env, name string, b client.Budget) *client.APIKeyCreated {
	t.Helper()
	res, err := env.Client(t).CreateAPIKeyWithResponse(bg, client.APIKeyCreate{Name: name, Scopes: []client.Scope{client.ScopeLLM}, Budget: &b})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusCreated || res.JSON201 == nil {
		t.Fatalf("create key %q = %d %s", name, res.StatusCode(), res.Body)
	}
	return res.JSON201
}

// spendCall posts body to path with key and reads the whole answer (a
// stream to its end).
func spendCall(t *testing.T, env *servertest.Env, key, path, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, env.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := env.HTTPClient(t, servertest.WithKey(key)).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// budgetRoutes are the routes that spend, each with a request costing
// callCost and how to tell its answer finished.
var budgetRoutes = []struct {
	name, path, body, done string
	openAI                 bool
}{
	{name: "native chat", path: "/v1/chat", body: `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`, done: `"totalTokens":1500`},
	{name: "native chat stream", path: "/v1/chat", body: `{"model":"fake/m","messages":[{"role":"user","content":"hi"}],"stream":true}`, done: "event: done"},
	{name: "native generate", path: "/v1/generate", body: `{"model":"fake/m","prompt":"hi"}`, done: `"totalTokens":1500`},
	{name: "native embeddings", path: "/v1/embeddings", body: `{"model":"fake/e","text":"hi"}`, done: `"embedding"`},
	{name: "openai chat", path: "/openai/v1/chat/completions", body: `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`, done: `"total_tokens":1500`, openAI: true},
	{name: "openai chat stream", path: "/openai/v1/chat/completions", body: `{"model":"fake/m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`, done: "[DONE]", openAI: true},
	{name: "openai completions", path: "/openai/v1/completions", body: `{"model":"fake/m","prompt":"hi"}`, done: `"total_tokens":1500`, openAI: true},
	{name: "openai embeddings", path: "/openai/v1/embeddings", body: `{"model":"fake/e","input":"hi"}`, done: `"embedding"`, openAI: true},
}

// TestBudget_RefusedOnceSpentOnEveryRoute: with a daily budget of $0.005
// and calls costing $0.0018 (cached prompt tokens at their own price),
// three calls pass and the fourth is refused before it goes upstream,
// with 429 budget_exceeded, Retry-After until midnight UTC and the
// details, on every route that spends: native and OpenAI-compatible,
// chat, completions, embeddings, streams.
func TestBudget_RefusedOnceSpentOnEveryRoute(t *testing.T) {
	up := newSpendUpstream(t)
	env := budgetEnv(t, up, clockAt("2030-01-15T18:00:00Z"))
	for _, rt := range budgetRoutes {
		t.Run(rt.name, func(t *testing.T) {
			key := budgetKey(t, env, rt.name, client.Budget{Usd: 0.005, Period: client.BudgetPeriodDay})
			for i := range 3 {
				st, _, body := spendCall(t, env, key.Key, rt.path, rt.body)
				if st != http.StatusOK || !strings.Contains(body, rt.done) {
					t.Fatalf("call %d = %d %s", i+1, st, body)
				}
			}
			calls := up.calls.Load()
			st, h, body := spendCall(t, env, key.Key, rt.path, rt.body)
			if st != http.StatusTooManyRequests {
				t.Fatalf("fourth call = %d %s, want 429", st, body)
			}
			if h.Get("Retry-After") != "21600" {
				t.Errorf("Retry-After = %q, want 21600 (6 h to midnight UTC)", h.Get("Retry-After"))
			}
			if up.calls.Load() != calls {
				t.Errorf("the refused call reached the upstream")
			}
			var e struct {
				Error struct {
					Code    string         `json:"code"`
					Type    string         `json:"type"`
					Message string         `json:"message"`
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatal(err)
			}
			if e.Error.Code != "budget_exceeded" || !strings.Contains(e.Error.Message, "0.0054 of its daily budget of $0.005") || !strings.Contains(e.Error.Message, "2030-01-16T00:00:00Z") {
				t.Errorf("error = %+v", e.Error)
			}
			if rt.openAI {
				if e.Error.Type != "insufficient_quota" {
					t.Errorf("OpenAI error type = %q, want insufficient_quota", e.Error.Type)
				}
				return
			}
			want := map[string]any{"budgetUsd": 0.005, "spentUsd": 3 * callCost, "period": "day", "resetAt": "2030-01-16T00:00:00Z"}
			if fmt.Sprint(e.Error.Details) != fmt.Sprint(want) {
				t.Errorf("details = %v, want %v", e.Error.Details, want)
			}
		})
	}
}

// TestBudget_StreamInFlightIsNeverCut: a stream admitted under a $0.001
// budget runs to its end though its $0.0018 crosses the budget; while it
// runs, its reservation refuses another call; afterwards the spend counts
// it in full and the next call is refused.
func TestBudget_StreamInFlightIsNeverCut(t *testing.T) {
	up := newSpendUpstream(t)
	env := budgetEnv(t, up, nil)
	key := budgetKey(t, env, "streamer", client.Budget{Usd: 0.001, Period: client.BudgetPeriodMonth})
	up.gate.Store(true)

	type answer struct {
		status int
		body   string
	}
	streamed := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, env.URL+"/v1/chat", strings.NewReader(`{"model":"fake/m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := env.HTTPClient(t, servertest.WithKey(key.Key)).Do(req)
		if err != nil {
			streamed <- answer{body: err.Error()}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		streamed <- answer{res.StatusCode, string(b)}
	}()
	<-up.arrived // the stream is open upstream

	st, _, body := spendCall(t, env, key.Key, "/v1/chat", `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`)
	if st != http.StatusTooManyRequests || !strings.Contains(body, "budget_exceeded") {
		t.Errorf("call during the stream = %d %s, want 429 budget_exceeded (the stream's reservation)", st, body)
	}
	close(up.release)
	a := <-streamed
	if a.status != http.StatusOK || !strings.Contains(a.body, "event: done") || !strings.Contains(a.body, `"totalTokens":1500`) {
		t.Fatalf("stream = %d %s, want it complete", a.status, a.body)
	}
	st, _, body = spendCall(t, env, key.Key, "/v1/chat", `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`)
	if st != http.StatusTooManyRequests || !strings.Contains(body, "budget_exceeded") {
		t.Errorf("call after the stream = %d %s, want 429", st, body)
	}
	got := getKey(t, env, key.Id)
	if got.Spend == nil || got.Spend.SpentUsd != callCost || got.Spend.RemainingUsd != 0 {
		t.Errorf("spend = %+v, want %v spent and nothing remaining", got.Spend, callCost)
	}
}

// TestBudget_ConcurrentStreamsOvershootByAtMostOneCall: 8 streams started
// together against a budget of 3.5 calls, each reserving exactly what it
// then costs: 4 are admitted and run to the end, 4 are refused; the
// recorded spend is the sum of the admitted calls' costs, the key's spend
// equals it, and it exceeds the budget by less than one call's cost.
func TestBudget_ConcurrentStreamsOvershootByAtMostOneCall(t *testing.T) {
	up := newSpendUpstream(t)
	env := budgetEnv(t, up, nil)
	// "hi" reserves 2 prompt tokens ((2+4+3)/4) and maxTokens 500.
	up.prompt.Store(2)
	up.cached.Store(0)
	up.completion.Store(500)
	const perCall = (2*1 + 500*2) / 1e6
	budget := usage.RoundUSD(3.5 * perCall)
	key := budgetKey(t, env, "concurrent", client.Budget{Usd: budget, Period: client.BudgetPeriodDay})
	up.gate.Store(true)

	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	refused := make(chan struct{}, n)
	for range n {
		wg.Go(func() {
			st, _, body := spendCall(t, env, key.Key, "/v1/chat", `{"model":"fake/m","messages":[{"role":"user","content":"hi"}],"maxTokens":500,"stream":true}`)
			if st == http.StatusOK && !strings.Contains(body, "event: done") {
				t.Errorf("admitted stream did not complete: %s", body)
			}
			mu.Lock()
			statuses[st]++
			mu.Unlock()
			if st != http.StatusOK {
				refused <- struct{}{}
			}
		})
	}
	// Every request is either open upstream or refused before any ends.
	for range n {
		select {
		case <-up.arrived:
		case <-refused:
		}
	}
	close(up.release)
	wg.Wait()
	if statuses[http.StatusOK] != 4 || statuses[http.StatusTooManyRequests] != 4 {
		t.Fatalf("statuses = %v, want 4 admitted and 4 refused", statuses)
	}
	if err := env.Server.Usage().Flush(bg); err != nil {
		t.Fatal(err)
	}
	res, err := env.Client(t).GetUsageWithResponse(bg, &client.GetUsageParams{Key: &key.Id})
	if err != nil || res.JSON200 == nil || len(res.JSON200.Data) != 1 {
		t.Fatalf("usage = %v %s", err, res.Body)
	}
	recorded := res.JSON200.Data[0].CostUsd
	if want := usage.RoundUSD(4 * perCall); recorded != want {
		t.Errorf("recorded spend = %v, want the sum of the 4 calls' costs %v", recorded, want)
	}
	if over := recorded - budget; over <= 0 || over >= perCall {
		t.Errorf("spend %v exceeds the budget %v by %v, want more than 0 and less than one call (%v)", recorded, budget, over, perCall)
	}
	if got := getKey(t, env, key.Id); got.Spend == nil || got.Spend.SpentUsd != recorded {
		t.Errorf("key spend = %+v, want %v", got.Spend, recorded)
	}
}

// TestBudget_EventsOncePerThresholdAndPeriod: with alerts at 50% and 80%,
// each alert is recorded once when the spend crosses it and exhaustion
// once, however many calls are refused after; the next day starts a new
// period with its own spend and alerts.
func TestBudget_EventsOncePerThresholdAndPeriod(t *testing.T) {
	up := newSpendUpstream(t)
	clock := clockAt("2030-01-15T12:00:00Z")
	env := budgetEnv(t, up, clock)
	key := budgetKey(t, env, "alerted", client.Budget{Usd: 0.005, Period: client.BudgetPeriodDay, AlertAt: &[]float64{0.5, 0.8}})
	chat := func() int {
		st, _, _ := spendCall(t, env, key.Key, "/v1/chat", `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`)
		return st
	}
	for i, want := range []int{200, 200, 200, 429, 429} { // 36%, 72%, 108%
		if st := chat(); st != want {
			t.Fatalf("call %d = %d, want %d", i+1, st, want)
		}
	}
	if err := env.Server.EventQueue().Flush(bg); err != nil {
		t.Fatal(err)
	}
	alerts := budgetEvents(t, env, client.EventTypeUsageBudgetAlert)
	exhausted := budgetEvents(t, env, client.EventTypeUsageBudgetExhausted)
	if len(alerts) != 2 || len(exhausted) != 1 {
		t.Fatalf("got %d alerts and %d exhausted, want 2 and 1: %v %v", len(alerts), len(exhausted), alerts, exhausted)
	}
	wantAlert := func(ev map[string]any, threshold, spent float64, day string) {
		t.Helper()
		want := map[string]any{"key": key.Id, "keyKind": "api_key", "keyName": "alerted", "period": "day",
			"periodStart": day + "T00:00:00Z", "resetAt": nextDay(day) + "T00:00:00Z", "budgetUsd": 0.005, "spentUsd": spent, "threshold": threshold}
		if fmt.Sprint(ev) != fmt.Sprint(want) {
			t.Errorf("alert = %v\nwant    %v", ev, want)
		}
	}
	// Newest first.
	wantAlert(alerts[0], 0.8, 3*callCost, "2030-01-15")
	wantAlert(alerts[1], 0.5, 2*callCost, "2030-01-15")
	if ex := exhausted[0]; ex["spentUsd"] != 3*callCost || ex["threshold"] != nil || ex["resetAt"] != "2030-01-16T00:00:00Z" {
		t.Errorf("exhausted = %v", ex)
	}

	next := clock.Load().Add(24 * time.Hour)
	clock.Store(&next)
	if got := getKey(t, env, key.Id).Spend; got == nil || got.SpentUsd != 0 || got.PeriodStart.Format(time.RFC3339) != "2030-01-16T00:00:00Z" {
		t.Fatalf("spend on the next day = %+v, want 0 from 2030-01-16", got)
	}
	for i := range 2 {
		if st := chat(); st != 200 {
			t.Fatalf("next day call %d = %d", i+1, st)
		}
	}
	if err := env.Server.EventQueue().Flush(bg); err != nil {
		t.Fatal(err)
	}
	alerts = budgetEvents(t, env, client.EventTypeUsageBudgetAlert)
	if len(alerts) != 3 {
		t.Fatalf("got %d alerts after a second day at 72%%, want 3", len(alerts))
	}
	wantAlert(alerts[0], 0.5, 2*callCost, "2030-01-16")
}

func nextDay(day string) string {
	d, _ := time.Parse(time.DateOnly, day)
	return d.AddDate(0, 0, 1).Format(time.DateOnly)
}

// budgetEvents lists the data of the recorded events of typ, newest first.
func budgetEvents(t *testing.T, env *servertest.Env, typ client.EventType) []map[string]any {
	t.Helper()
	res, err := env.Client(t).ListEventsWithResponse(bg, &client.ListEventsParams{Type: &typ, Limit: ptrTo(100)})
	if err != nil || res.JSON200 == nil {
		t.Fatalf("list events: %v %s", err, res.Body)
	}
	var out []map[string]any
	for _, ev := range res.JSON200.Data {
		out = append(out, ev.Data)
	}
	return out
}

func getKey(t *testing.T, env *servertest.Env, id string) *client.APIKey {
	t.Helper()
	res, err := env.Client(t).GetAPIKeyWithResponse(bg, id)
	if err != nil || res.JSON200 == nil {
		t.Fatalf("get key %s: %v %s", id, err, res.Body)
	}
	return res.JSON200
}

// TestBudget_SpendReports: API keys and OAuth clients with a budget show
// their spend on create, get, list and update; raising the budget with PUT
// applies from the next request and keeps the spend counted; a total
// budget never resets and its refusal says to raise it; a credential
// without budget has no spend.
func TestBudget_SpendReports(t *testing.T) {
	up := newSpendUpstream(t)
	env := budgetEnv(t, up, clockAt("2030-01-15T12:00:00Z"))
	admin := env.Client(t)

	t.Run("api key", func(t *testing.T) {
		key := budgetKey(t, env, "reported", client.Budget{Usd: 0.003, Period: client.BudgetPeriodWeek})
		if s := key.Spend; s == nil || s.SpentUsd != 0 || s.RemainingUsd != 0.003 || s.Period != client.SpendPeriodWeek ||
			s.PeriodStart.Format(time.RFC3339) != "2030-01-14T00:00:00Z" || s.ResetAt == nil || s.ResetAt.Format(time.RFC3339) != "2030-01-21T00:00:00Z" {
			t.Fatalf("spend on create = %+v, want 0 of 0.003 in the week from Monday 2030-01-14", s)
		}
		for i, want := range []int{200, 200, 429} {
			if st, _, body := spendCall(t, env, key.Key, "/v1/chat", `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`); st != want {
				t.Fatalf("call %d = %d %s", i+1, st, body)
			}
		}
		if s := getKey(t, env, key.Id).Spend; s == nil || s.SpentUsd != 2*callCost || s.RemainingUsd != 0 {
			t.Errorf("spend on get = %+v, want %v spent", s, 2*callCost)
		}
		list, err := admin.ListAPIKeysWithResponse(bg, &client.ListAPIKeysParams{Limit: ptrTo(100)})
		if err != nil || list.JSON200 == nil {
			t.Fatal(err)
		}
		for _, k := range list.JSON200.Data {
			switch {
			case k.Id == key.Id && (k.Spend == nil || k.Spend.SpentUsd != 2*callCost):
				t.Errorf("listed spend = %+v", k.Spend)
			case k.Id != key.Id && k.Budget == nil && k.Spend != nil:
				t.Errorf("key %s without budget lists a spend", k.Name)
			}
		}
		upd, err := admin.UpdateAPIKeyWithResponse(bg, key.Id, nil, client.APIKeyUpdate{Name: "reported", Budget: &client.Budget{Usd: 0.01, Period: client.BudgetPeriodWeek}})
		if err != nil || upd.JSON200 == nil {
			t.Fatalf("update: %v %s", err, upd.Body)
		}
		if s := upd.JSON200.Spend; s == nil || s.SpentUsd != 2*callCost || s.RemainingUsd != usage.RoundUSD(0.01-2*callCost) {
			t.Errorf("spend after raising the budget = %+v, want the spend kept", s)
		}
		if st, _, body := spendCall(t, env, key.Key, "/v1/chat", `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`); st != 200 {
			t.Errorf("call after raising the budget = %d %s", st, body)
		}
	})

	t.Run("oauth client with a total budget", func(t *testing.T) {
		res, err := admin.CreateOAuthClientWithResponse(bg, client.OAuthClientCreate{Name: "spender", Scopes: []client.Scope{client.ScopeLLM},
			Budget: &client.Budget{Usd: 0.001, Period: client.BudgetPeriodTotal}})
		if err != nil || res.JSON201 == nil {
			t.Fatalf("create client: %v %s", err, res.Body)
		}
		c := res.JSON201
		if s := c.Spend; s == nil || s.Period != client.SpendPeriodTotal || !s.PeriodStart.Equal(c.CreatedAt) || s.ResetAt != nil {
			t.Fatalf("spend on create = %+v, want a total period from the creation (%v)", s, c.CreatedAt)
		}
		tok := issueToken(t, env, c.Id, c.ClientSecret, nil).AccessToken
		if st, _, body := spendCall(t, env, tok, "/openai/v1/chat/completions", `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`); st != 200 {
			t.Fatalf("first call = %d %s", st, body)
		}
		st, h, body := spendCall(t, env, tok, "/v1/chat", `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`)
		if st != http.StatusTooManyRequests || h.Get("Retry-After") != "" || !strings.Contains(body, "never resets; raise budget.usd (PUT /v1/oauth-clients/"+c.Id+")") {
			t.Errorf("second call = %d (Retry-After %q) %s, want 429 without Retry-After saying to raise the budget", st, h.Get("Retry-After"), body)
		}
		got, err := admin.GetOAuthClientWithResponse(bg, c.Id)
		if err != nil || got.JSON200 == nil {
			t.Fatal(err)
		}
		if s := got.JSON200.Spend; s == nil || s.SpentUsd != callCost || s.BudgetUsd != 0.001 {
			t.Errorf("client spend = %+v, want %v", s, callCost)
		}
	})
}
