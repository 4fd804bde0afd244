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

// withLimits sets the default per-credential data-plane limits.
func withLimits(rpm, tpm int) servertest.Option {
	return func(c *config.Config) {
		c.Limits.RequestsPerMinute = rpm
		c.Limits.TokensPerMinute = tpm
	}
}

// withControlLimit sets the control-plane limit.
func withControlLimit(rpm int) servertest.Option {
	return func(c *config.Config) { c.Limits.ControlPlaneRequestsPerMinute = rpm }
}

// TestRateLimitBurst: with 5 requests per minute, a sequential burst of 8
// gets exactly 3 refusals, each header set counting down; the refill (one
// request per 12 s) cannot add one during the burst. Both planes behave
// alike, each at its own limit.
func TestRateLimitBurst(t *testing.T) {
	tests := []struct {
		name  string
		opts  []servertest.Option
		call  func(c *client.ClientWithResponses) (*http.Response, []byte, *client.ErrorResponse, error)
		limit string
		plane string
	}{
		{"data plane", []servertest.Option{withLimits(5, 0)}, listModels, "requestsPerMinute", "data"},
		{"control plane", []servertest.Option{withControlLimit(5)}, listAPIKeys, "controlPlaneRequestsPerMinute", "control"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			testBurst(t, servertest.New(t, tc.opts...), tc.call, tc.limit, tc.plane)
		})
	}
}

// listModels and listAPIKeys are one data-plane and one control-plane call.
func listModels(c *client.ClientWithResponses) (*http.Response, []byte, *client.ErrorResponse, error) {
	res, err := c.ListModelsWithResponse(bg, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	return res.HTTPResponse, res.Body, res.JSON429, nil
}

func listAPIKeys(c *client.ClientWithResponses) (*http.Response, []byte, *client.ErrorResponse, error) {
	res, err := c.ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	return res.HTTPResponse, res.Body, res.JSON429, nil
}

func testBurst(t *testing.T, env *servertest.Env, call func(*client.ClientWithResponses) (*http.Response, []byte, *client.ErrorResponse, error), limit, plane string) {
	c := env.Client(t)
	for i := range 8 {
		hres, body, e429, err := call(c)
		if err != nil {
			t.Fatal(err)
		}
		h := hres.Header
		wantRemaining := max(0, 4-i)
		if h.Get("RateLimit-Limit") != "5" || h.Get("RateLimit-Remaining") != strconv.Itoa(wantRemaining) || h.Get("RateLimit-Policy") != "5;w=60" {
			t.Errorf("request %d headers: limit %q remaining %q policy %q, want 5, %d", i, h.Get("RateLimit-Limit"), h.Get("RateLimit-Remaining"), h.Get("RateLimit-Policy"), wantRemaining)
		}
		reset, err := strconv.Atoi(h.Get("RateLimit-Reset"))
		if err != nil || reset < 1 || reset > 60 {
			t.Errorf("request %d RateLimit-Reset = %q, want 1-60 seconds", i, h.Get("RateLimit-Reset"))
		}
		if i < 5 {
			if hres.StatusCode != http.StatusOK {
				t.Fatalf("request %d = %d %s, want 200", i, hres.StatusCode, body)
			}
			continue
		}
		if hres.StatusCode != http.StatusTooManyRequests || e429 == nil || e429.Error.Code != "rate_limited" {
			t.Fatalf("request %d = %d %s, want 429 rate_limited", i, hres.StatusCode, body)
		}
		ra, err := strconv.Atoi(h.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 12 {
			t.Errorf("request %d Retry-After = %q, want 1-12 s (one request refills every 12 s)", i, h.Get("Retry-After"))
		}
		if d := *e429.Error.Details; d["limit"] != limit || d["plane"] != plane || d["limitPerMinute"] != float64(5) {
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
			res, err := c.ListModelsWithResponse(bg, nil)
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
// data-plane budget, and an override replaces the default there; the
// control plane's limit is the same for every credential, override or not.
func TestRateLimitPerCredential(t *testing.T) {
	env := servertest.New(t, withLimits(3, 0), withControlLimit(10))
	admin := env.Client(t)
	// Control-plane calls: they leave the admin key's data-plane budget whole.
	k := createKey(t, admin, "second", []client.Scope{client.ScopeAdmin}, nil)
	rpm := 6
	oc := createOAuthClient(t, admin, "svc", []client.Scope{client.ScopeAdmin}, &client.RateLimitOverride{RequestsPerMinute: &rpm})
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

	count := func(c *client.ClientWithResponses, call func(*client.ClientWithResponses) (*http.Response, []byte, *client.ErrorResponse, error), n int) (allowed int, limit string) {
		for range n {
			res, _, _, err := call(c)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode == http.StatusOK {
				allowed++
			}
			limit = res.Header.Get("RateLimit-Limit")
		}
		return allowed, limit
	}
	tests := []struct {
		name      string
		c         *client.ClientWithResponses
		call      func(*client.ClientWithResponses) (*http.Response, []byte, *client.ErrorResponse, error)
		n         int
		want      int
		wantLimit string
	}{
		{"admin key: data plane untouched by its 3 creations", admin, listModels, 5, 3, "3"},
		{"API key override of 2", env.ClientWithKey(t, slow.Key), listModels, 5, 2, "2"},
		{"second key: its own 3", env.ClientWithKey(t, k.Key), listModels, 5, 3, "3"},
		{"OAuth client: override of 6, first token", env.ClientWithKey(t, tok.AccessToken), listModels, 4, 4, "6"},
		{"OAuth client: second token shares the budget", env.ClientWithKey(t, tok2.AccessToken), listModels, 4, 2, "6"},
		{"admin key: control plane, 7 left after 3 creations", admin, listAPIKeys, 10, 7, "10"},
		{"API key override does not bound the control plane", env.ClientWithKey(t, slow.Key), listAPIKeys, 12, 10, "10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, limit := count(tc.c, tc.call, tc.n)
			if got != tc.want || limit != tc.wantLimit {
				t.Errorf("allowed %d of %d with RateLimit-Limit %s, want %d with %s", got, tc.n, limit, tc.want, tc.wantLimit)
			}
		})
	}
}

// TestRateLimitPlanesAreSeparate: many control-plane calls (an operator's
// Terraform apply) do not spend the data-plane budget, and a spent
// data-plane budget does not stop the control plane; each response carries
// the headers of its own plane.
func TestRateLimitPlanesAreSeparate(t *testing.T) {
	env := servertest.New(t, withLimits(3, 0), withControlLimit(20))
	c := env.Client(t)
	steps := []struct {
		name       string
		call       func(*client.ClientWithResponses) (*http.Response, []byte, *client.ErrorResponse, error)
		n, allowed int
		limit      string
		remaining  string // of the last response
	}{
		{"15 control-plane calls", listAPIKeys, 15, 15, "20", "5"},
		{"data plane: whole budget left", listModels, 3, 3, "3", "0"},
		{"data plane: now spent", listModels, 1, 0, "3", "0"},
		{"control plane: still answers after the data plane is spent", listAPIKeys, 5, 5, "20", "0"},
		{"control plane: limited at its own limit", listAPIKeys, 1, 0, "20", "0"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			allowed := 0
			var last *http.Response
			for range st.n {
				res, body, _, err := st.call(c)
				if err != nil {
					t.Fatal(err)
				}
				switch res.StatusCode {
				case http.StatusOK:
					allowed++
				case http.StatusTooManyRequests:
				default:
					t.Fatalf("= %d %s", res.StatusCode, body)
				}
				last = res
			}
			h := last.Header
			if allowed != st.allowed || h.Get("RateLimit-Limit") != st.limit || h.Get("RateLimit-Remaining") != st.remaining || h.Get("RateLimit-Policy") != st.limit+";w=60" {
				t.Errorf("allowed %d of %d, last RateLimit-Limit %s Remaining %s Policy %s; want %d, %s, %s",
					allowed, st.n, h.Get("RateLimit-Limit"), h.Get("RateLimit-Remaining"), h.Get("RateLimit-Policy"), st.allowed, st.limit, st.remaining)
			}
		})
	}
}
