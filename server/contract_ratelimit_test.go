package server_test

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// withLimits sets the default per-credential limits.
func withLimits(rpm, tpm int) servertest.Option {
	return func(c *config.Config) {
		c.Limits.RequestsPerMinute = rpm
		c.Limits.TokensPerMinute = tpm
	}
}

// TestRateLimitBurst: with 5 requests per minute, a sequential burst of 8
// gets exactly 3 refusals, each header set counting down; the refill (one
// request per 12 s) cannot add one during the burst.
func TestRateLimitBurst(t *testing.T) {
	env := servertest.New(t, withLimits(5, 0))
	c := env.Client(t)
	for i := range 8 {
		res, err := c.ListAPIKeysWithResponse(bg, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := res.HTTPResponse.Header
		wantRemaining := max(0, 4-i)
		if h.Get("RateLimit-Limit") != "5" || h.Get("RateLimit-Remaining") != strconv.Itoa(wantRemaining) || h.Get("RateLimit-Policy") != "5;w=60" {
			t.Errorf("request %d headers: limit %q remaining %q policy %q, want 5, %d", i, h.Get("RateLimit-Limit"), h.Get("RateLimit-Remaining"), h.Get("RateLimit-Policy"), wantRemaining)
		}
		reset, err := strconv.Atoi(h.Get("RateLimit-Reset"))
		if err != nil || reset < 1 || reset > 60 {
			t.Errorf("request %d RateLimit-Reset = %q, want 1-60 seconds", i, h.Get("RateLimit-Reset"))
		}
		if i < 5 {
			if res.StatusCode() != http.StatusOK {
				t.Fatalf("request %d = %d %s, want 200", i, res.StatusCode(), res.Body)
			}
			continue
		}
		if res.StatusCode() != http.StatusTooManyRequests || res.JSON429 == nil || res.JSON429.Error.Code != "rate_limited" {
			t.Fatalf("request %d = %d %s, want 429 rate_limited", i, res.StatusCode(), res.Body)
		}
		ra, err := strconv.Atoi(h.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 12 {
			t.Errorf("request %d Retry-After = %q, want 1-12 s (one request refills every 12 s)", i, h.Get("Retry-After"))
		}
		if d := *res.JSON429.Error.Details; d["limit"] != "requestsPerMinute" || d["limitPerMinute"] != float64(5) {
			t.Errorf("429 details = %v", d)
		}
	}
	// Public routes are not limited and carry no headers.
	res, err := env.ClientWithKey(t, "").GetHealthzWithResponse(bg)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusOK || res.HTTPResponse.Header.Get("RateLimit-Limit") != "" {
		t.Fatalf("healthz = %d %v", res.StatusCode(), res.HTTPResponse.Header)
	}
}

// TestRateLimitConcurrentBurst: 40 concurrent requests against a limit of
// 10 get exactly 30 refusals.
func TestRateLimitConcurrentBurst(t *testing.T) {
	env := servertest.New(t, withLimits(10, 0))
	c := env.Client(t)
	var ok, limited, other atomic.Int64
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			res, err := c.ListAPIKeysWithResponse(bg, nil)
			switch {
			case err != nil:
				t.Error(err)
			case res.StatusCode() == http.StatusOK:
				ok.Add(1)
			case res.StatusCode() == http.StatusTooManyRequests && res.HTTPResponse.Header.Get("Retry-After") != "" && res.HTTPResponse.Header.Get("RateLimit-Remaining") == "0":
				limited.Add(1)
			default:
				other.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 10 || limited.Load() != 30 || other.Load() != 0 {
		t.Fatalf("200: %d, 429: %d, other: %d; want 10, 30, 0", ok.Load(), limited.Load(), other.Load())
	}
}

// TestRateLimitPerCredential: each API key and OAuth client has its own
// budget, and a client's override replaces the default.
func TestRateLimitPerCredential(t *testing.T) {
	env := servertest.New(t, withLimits(3, 0))
	admin := env.Client(t)
	// The admin key spends its 3 on these creations.
	k := createKey(t, admin, "second", []client.Scope{client.ScopeAdmin}, nil)
	rpm := 6
	oc := createOAuthClient(t, admin, "svc", []client.Scope{client.ScopeAdmin}, &client.RateLimitOverride{RequestsPerMinute: &rpm})
	// With the override the admin key's budget is spent (3 of 3).
	two := 2
	kres, err := admin.CreateAPIKeyWithResponse(bg, client.APIKeyCreate{Name: "slow", Scopes: []client.Scope{client.ScopeAdmin}, RateLimit: &client.RateLimitOverride{RequestsPerMinute: &two}})
	if err != nil || kres.StatusCode() != http.StatusCreated {
		t.Fatalf("create key with a rate limit = %v %v", kres, err)
	}
	if rl := kres.JSON201.RateLimit; rl == nil || rl.RequestsPerMinute == nil || *rl.RequestsPerMinute != 2 || rl.TokensPerMinute != nil {
		t.Errorf("created key rateLimit = %+v", rl)
	}
	slow := kres.JSON201
	tok := issueToken(t, env, oc.Id, oc.ClientSecret, nil) // public route: not counted
	// Two tokens of the same client share its budget.
	tok2 := issueToken(t, env, oc.Id, oc.ClientSecret, nil)

	count := func(c *client.ClientWithResponses, n int) (allowed int, limit string) {
		for range n {
			res, err := c.ListAPIKeysWithResponse(bg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode() == http.StatusOK {
				allowed++
			}
			limit = res.HTTPResponse.Header.Get("RateLimit-Limit")
		}
		return allowed, limit
	}
	tests := []struct {
		name      string
		c         *client.ClientWithResponses
		n         int
		want      int
		wantLimit string
	}{
		{"admin key: spent", admin, 5, 0, "3"},
		{"API key override of 2", env.ClientWithKey(t, slow.Key), 5, 2, "2"},
		{"second key: its own 3", env.ClientWithKey(t, k.Key), 5, 3, "3"},
		{"OAuth client: override of 6, first token", env.ClientWithKey(t, tok.AccessToken), 4, 4, "6"},
		{"OAuth client: second token shares the budget", env.ClientWithKey(t, tok2.AccessToken), 4, 2, "6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, limit := count(tc.c, tc.n)
			if got != tc.want || limit != tc.wantLimit {
				t.Errorf("allowed %d of %d with RateLimit-Limit %s, want %d with %s", got, tc.n, limit, tc.want, tc.wantLimit)
			}
		})
	}
}
