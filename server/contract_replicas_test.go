package server_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redistest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// shareKeys copies the API keys of from into to, so that two servers with
// their own bbolt (two replicas) know the same credentials.
func shareKeys(t *testing.T, from, to *servertest.Env) {
	t.Helper()
	type kv struct {
		b, k string
		v    []byte
	}
	var all []kv
	err := from.Store.View(bg, func(tx store.Tx) error {
		for _, b := range []string{"apikeys", "apikeys_by_hash"} {
			if err := tx.Scan(b, "", "", func(k string, v []byte) (bool, error) {
				all = append(all, kv{b, k, append([]byte(nil), v...)})
				return true, nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := to.Store.Update(bg, func(tx store.Tx) error {
		for _, e := range all {
			if err := tx.Put(e.b, e.k, e.v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// llmKey creates an llm key on env.
func llmKey(t *testing.T, env *servertest.Env, name string) string {
	t.Helper()
	res, err := env.Client(t).CreateAPIKeyWithResponse(bg, client.APIKeyCreate{Name: name, Scopes: []client.Scope{client.ScopeLLM}})
	if err != nil || res.JSON201 == nil {
		t.Fatalf("create key = %v %s", err, res.Body)
	}
	return res.JSON201.Key
}

// TestReplicas_RequestLimitHoldsAcrossReplicas: two servers on one Redis
// under round-robin traffic admit exactly the limit in total, not the
// limit per replica.
func TestReplicas_RequestLimitHoldsAcrossReplicas(t *testing.T) {
	r := redistest.New(t)
	const limit = 10
	a := servertest.New(t, servertest.WithRedis(r.URL()), withLimits(limit, 0))
	b := servertest.New(t, servertest.WithRedis(r.URL()), withLimits(limit, 0))
	key := llmKey(t, a, "shared")
	shareKeys(t, a, b)
	clients := []*client.ClientWithResponses{a.ClientWithKey(t, key), b.ClientWithKey(t, key)}
	counts := map[int]int{}
	for i := range 3 * limit {
		res, _, _, err := listModels(clients[i%2])
		if err != nil {
			t.Fatal(err)
		}
		counts[res.StatusCode]++
	}
	if counts[http.StatusOK] != limit || counts[http.StatusTooManyRequests] != 2*limit {
		t.Fatalf("statuses over two replicas = %v, want %d × 200 and %d × 429", counts, limit, 2*limit)
	}
}

// TestReplicas_BudgetHoldsAcrossReplicas: a daily budget of $0.005 with
// calls costing $0.0018 admits three calls in total over two replicas
// (each replica alone would admit three), and both report the same
// spend.
func TestReplicas_BudgetHoldsAcrossReplicas(t *testing.T) {
	r := redistest.New(t)
	up := newSpendUpstream(t)
	now := clockAt("2030-01-15T18:00:00Z")
	a := budgetEnv(t, up, now, servertest.WithRedis(r.URL()))
	b := budgetEnv(t, up, now, servertest.WithRedis(r.URL()))
	key := budgetKey(t, a, "shared", client.Budget{Usd: 0.005, Period: client.BudgetPeriodDay})
	shareKeys(t, a, b)
	envs := []*servertest.Env{a, b}
	ok := 0
	for i := range 6 {
		st, _, body := spendCall(t, envs[i%2], key.Key, "/v1/chat", `{"model":"fake/m","messages":[{"role":"user","content":"hi"}]}`)
		switch st {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			if !strings.Contains(body, "budget_exceeded") {
				t.Fatalf("call %d = 429 %s, want budget_exceeded", i+1, body)
			}
		default:
			t.Fatalf("call %d = %d %s", i+1, st, body)
		}
	}
	if ok != 3 {
		t.Fatalf("admitted %d calls over two replicas, want 3 (the budget holds in total)", ok)
	}
	for _, env := range envs {
		k := getKey(t, env, key.Id)
		if k.Spend == nil || k.Spend.SpentUsd != 3*callCost {
			t.Errorf("spend reported by %s = %+v, want $%v", env.URL, k.Spend, 3*callCost)
		}
	}
}

// TestReplicas_TokenLimitHoldsAcrossReplicas: tokens reserved and settled
// on one replica are missing on the other: with 4000 tokens per minute,
// calls reserving 2002 and using 1500 pass on A then B, and the third (on
// A, which alone would still hold 2500) is refused.
func TestReplicas_TokenLimitHoldsAcrossReplicas(t *testing.T) {
	r := redistest.New(t)
	up := newSpendUpstream(t)
	a := budgetEnv(t, up, nil, servertest.WithRedis(r.URL()), withLimits(0, 4000))
	b := budgetEnv(t, up, nil, servertest.WithRedis(r.URL()), withLimits(0, 4000))
	key := llmKey(t, a, "shared")
	shareKeys(t, a, b)
	body := `{"model":"fake/m","messages":[{"role":"user","content":"hi"}],"maxTokens":2000}`
	if st, _, out := spendCall(t, a, key, "/v1/chat", body); st != http.StatusOK {
		t.Fatalf("first call on A = %d %s", st, out)
	}
	a.Server.Settled() // A settles in the background; B cannot wait for it
	st, h, out := spendCall(t, b, key, "/v1/chat", body)
	if st != http.StatusOK {
		t.Fatalf("second call on B = %d %s", st, out)
	}
	// 4000 - 1500 (A's call) - 2002 (B's reservation), plus a few ms of refill.
	if rem, _ := strconv.Atoi(h.Get("X-RateLimit-Remaining-Tokens")); rem < 498 || rem > 510 {
		t.Errorf("remaining tokens on B = %q, want about 498 (A's usage counted)", h.Get("X-RateLimit-Remaining-Tokens"))
	}
	if st, _, out := spendCall(t, a, key, "/v1/chat", body); st != http.StatusTooManyRequests || !strings.Contains(out, "tokens per minute") {
		t.Fatalf("third call on A = %d %s, want 429 (1000 tokens left over both replicas)", st, out)
	}
}

// TestReplicas_ReadyzReportsRedis: with redis.url set, /readyz answers
// 503 naming Redis while it is down, and 200 again once it is back.
func TestReplicas_ReadyzReportsRedis(t *testing.T) {
	r := redistest.New(t)
	env := servertest.New(t, servertest.WithRedis(r.URL()))
	c := env.ClientWithKey(t, "")
	ready := func() (int, string) {
		res, err := c.GetReadyzWithResponse(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode(), string(res.Body)
	}
	if st, body := ready(); st != http.StatusOK {
		t.Fatalf("GET /readyz = %d %s, want 200", st, body)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if st, body := ready(); st != http.StatusServiceUnavailable || !strings.Contains(body, "Redis") || !strings.Contains(body, `"unavailable"`) {
		t.Fatalf("GET /readyz with Redis down = %d %s, want 503 unavailable naming Redis", st, body)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	if st, body := ready(); st != http.StatusOK {
		t.Fatalf("GET /readyz after Redis is back = %d %s, want 200", st, body)
	}
}
