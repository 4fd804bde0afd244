package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redisconn"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redistest"
)

// clock is a manual clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTest(mk func(Options) Limiter, rpm, tpm int) (Limiter, *clock) {
	c := newClock()
	return mk(Options{RequestsPerMinute: rpm, TokensPerMinute: tpm, Now: c.Now}), c
}

// impl builds one implementation of Limiter for a test.
type impl struct {
	name string
	new  func(t *testing.T, o Options) Limiter
}

// impls are the limiters every behaviour test runs against: in memory,
// and in a real Redis (one server per test, failing closed so that a Redis
// error fails the test instead of admitting), deciding every call there
// or with a second of each limit prefetched (one replica sees the same
// levels either way).
var impls = []impl{
	{"memory", func(t *testing.T, o Options) Limiter { return New(o) }},
	{"redis", func(t *testing.T, o Options) Limiter {
		return NewRedis(redisClient(t, redistest.New(t)), o, &redisconn.Fallback{Closed: true, Timeout: 5 * time.Second})
	}},
	{"redis prefetch", func(t *testing.T, o Options) Limiter {
		o.Prefetch = time.Second
		l := NewRedis(redisClient(t, redistest.New(t)), o, &redisconn.Fallback{Closed: true, Timeout: 5 * time.Second})
		t.Cleanup(l.Close)
		return l
	}},
}

func redisClient(t testing.TB, srv *redistest.Server) *redis.Client {
	c, err := redisconn.Open(config.Redis{URL: srv.URL(), Timeout: config.Duration(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// forEach runs test once per implementation.
func forEach(t *testing.T, test func(t *testing.T, mk func(Options) Limiter)) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			test(t, func(o Options) Limiter { return im.new(t, o) })
		})
	}
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// allow is AllowRequest failing the test on an error.
func allow(t testing.TB, l Limiter, p *auth.Principal, plane Plane) Result {
	t.Helper()
	r, err := l.AllowRequest(context.Background(), p, plane)
	if err != nil {
		t.Fatalf("AllowRequest = %v", err)
	}
	return r
}

func key(id string) *auth.Principal { return &auth.Principal{ID: id, Kind: auth.KindAPIKey} }

func TestRequestsBurstThenSteadyRate(t *testing.T) {
	forEach(t, func(t *testing.T, mk func(Options) Limiter) {
		l, c := newTest(mk, 60, 0)
		p := key("a")
		for i := range 60 {
			r := allow(t, l, p, DataPlane)
			if !r.Allowed || r.Remaining != 59-i || r.Limit != 60 {
				t.Fatalf("request %d = %+v", i, r)
			}
		}
		r := allow(t, l, p, DataPlane)
		if r.Allowed || r.RetryAfter != time.Second || r.Remaining != 0 || r.Reset != time.Minute {
			t.Fatalf("61st request = %+v, want refused, retry after 1s, reset in 1m", r)
		}
		c.Add(999 * time.Millisecond)
		if r := allow(t, l, p, DataPlane); r.Allowed {
			t.Fatalf("after 999ms = %+v, want refused", r)
		}
		c.Add(time.Millisecond)
		if r := allow(t, l, p, DataPlane); !r.Allowed || r.Remaining != 0 {
			t.Fatalf("after 1s = %+v, want one more allowed", r)
		}
		// Refill is capped at one minute's allowance.
		c.Add(time.Hour)
		if r := allow(t, l, p, DataPlane); !r.Allowed || r.Remaining != 59 {
			t.Fatalf("after an hour = %+v, want a full bucket", r)
		}
	})
}

func TestPerCredentialAndOverrides(t *testing.T) {
	forEach(t, func(t *testing.T, mk func(Options) Limiter) {
		l, _ := newTest(mk, 2, 0)
		a, b := key("a"), key("b")
		sameIDOtherKind := &auth.Principal{ID: "a", Kind: auth.KindOAuthToken}
		over := &auth.Principal{ID: "c", Kind: auth.KindOAuthToken, Policy: auth.Policy{RateLimit: &auth.RateLimit{RequestsPerMinute: 5}}}
		count := func(p *auth.Principal, n int) (ok int) {
			for range n {
				if allow(t, l, p, DataPlane).Allowed {
					ok++
				}
			}
			return ok
		}
		tests := []struct {
			name string
			p    *auth.Principal
			want int
		}{
			{"first key", a, 2},
			{"second key has its own bucket", b, 2},
			{"same id, other credential kind", sameIDOtherKind, 2},
			{"override", over, 5},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if got := count(tc.p, 10); got != tc.want {
					t.Errorf("allowed %d of 10, want %d", got, tc.want)
				}
			})
		}
		if r := allow(t, l, nil, DataPlane); !r.Allowed || r.Limit != 0 {
			t.Errorf("anonymous = %+v, want allowed without limit", r)
		}
		off, _ := newTest(mk, 0, 0)
		if r := allow(t, off, a, DataPlane); !r.Allowed || r.Limit != 0 {
			t.Errorf("limit off = %+v", r)
		}
	})
}

func TestOverrideChangeKeepsLevel(t *testing.T) {
	forEach(t, func(t *testing.T, mk func(Options) Limiter) {
		l, _ := newTest(mk, 10, 0)
		p := key("a")
		for range 8 {
			allow(t, l, p, DataPlane)
		}
		p.RateLimit = &auth.RateLimit{RequestsPerMinute: 1}
		if r := allow(t, l, p, DataPlane); !r.Allowed || r.Remaining != 0 || r.Limit != 1 {
			t.Fatalf("after lowering the limit = %+v", r)
		}
		if r := allow(t, l, p, DataPlane); r.Allowed {
			t.Fatalf("= %+v, want refused", r)
		}
	})
}

func TestConcurrentBurstIsExact(t *testing.T) {
	forEach(t, func(t *testing.T, mk func(Options) Limiter) {
		l, _ := newTest(mk, 100, 0)
		p := key("a")
		var ok, refused atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 25 {
					if r, err := l.AllowRequest(context.Background(), p, DataPlane); err == nil && r.Allowed {
						ok.Add(1)
					} else {
						refused.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if ok.Load() != 100 || refused.Load() != 300 {
			t.Fatalf("allowed %d refused %d, want 100 and 300", ok.Load(), refused.Load())
		}
	})
}

func TestReserveSettle(t *testing.T) {
	forEach(t, func(t *testing.T, mk func(Options) Limiter) {
		l, c := newTest(mk, 0, 1000)
		p := key("a")
		h := http.Header{}
		ctx := WithHeader(context.Background(), h)

		r1, err := l.Reserve(ctx, p, 600)
		if err != nil {
			t.Fatal(err)
		}
		if h.Get(HeaderLimitTokens) != "1000" || h.Get(HeaderRemainingTokens) != "400" || h.Get(HeaderResetTokens) != "36" {
			t.Errorf("token headers = %v", h)
		}
		// 600 are held: a second 600 does not fit.
		if _, err := l.Reserve(ctx, p, 600); !errors.Is(err, errs.RateLimited) {
			t.Fatalf("second reservation = %v, want rate_limited", err)
		}
		var e *errs.Error
		if _, err := l.Reserve(ctx, p, 500); !errors.As(err, &e) || e.RetryAfter != 6*time.Second || e.Details["limit"] != "tokensPerMinute" {
			t.Fatalf("reservation of 500 with 400 left = %v, want retry after 6s", err)
		}
		// The call used 100: 500 flow back.
		r1.Settle(100)
		r1.Settle(0) // only the first settle counts
		r2, err := l.Reserve(ctx, p, 900)
		if err != nil {
			t.Fatalf("after settling = %v, want 900 to fit", err)
		}
		// Usage beyond the reservation is charged: the bucket goes into debt.
		r2.Settle(1500)
		if _, err := l.Reserve(ctx, p, 1); err == nil {
			t.Fatal("reservation while in debt succeeded")
		}
		if h.Get(HeaderRemainingTokens) != "0" {
			t.Errorf("remaining while in debt = %q", h.Get(HeaderRemainingTokens))
		}
		// Debt: 1000 - 100 - 1500 = -600; 601 tokens needed for 1 → 36.06 s.
		c.Add(36 * time.Second)
		if _, err := l.Reserve(ctx, p, 1); err == nil {
			t.Fatal("reservation before the debt is repaid succeeded")
		}
		c.Add(100 * time.Millisecond)
		if _, err := l.Reserve(ctx, p, 1); err != nil {
			t.Fatalf("after repaying the debt = %v", err)
		}
		var nilRes *Reservation
		nilRes.Settle(10) // no limit: a nil reservation is valid
	})
}

func TestReserveLargerThanLimitNeedsFullBucket(t *testing.T) {
	forEach(t, func(t *testing.T, mk func(Options) Limiter) {
		l, c := newTest(mk, 0, 1000)
		p := key("a")
		ctx := context.Background()
		r, err := l.Reserve(ctx, p, 5000)
		if err != nil {
			t.Fatalf("reservation above the limit with a full bucket = %v", err)
		}
		if r.Reserved() != 5000 {
			t.Errorf("reserved %d", r.Reserved())
		}
		r.Settle(200)
		c.Add(12 * time.Second) // 800 + 200 refilled = full again
		if _, err := l.Reserve(ctx, p, 5000); err != nil {
			t.Fatalf("= %v", err)
		}
		if _, err := l.Reserve(ctx, p, 5000); err == nil {
			t.Fatal("second oversized reservation on an empty bucket succeeded")
		}
	})
}

func TestHeadersAndError(t *testing.T) {
	forEach(t, func(t *testing.T, mk func(Options) Limiter) {
		l, _ := newTest(mk, 3, 0)
		p := key("a")
		h := http.Header{}
		var last Result
		for range 4 {
			last = allow(t, l, p, DataPlane)
		}
		last.SetHeaders(h)
		if h.Get(HeaderLimit) != "3" || h.Get(HeaderRemaining) != "0" || h.Get(HeaderReset) != "60" || h.Get(HeaderPolicy) != "3;w=60" {
			t.Errorf("headers = %v", h)
		}
		e := last.Err()
		if e.Kind != errs.RateLimited || e.RetryAfter != 20*time.Second || e.Details["limit"] != "requestsPerMinute" {
			t.Errorf("error = %+v", e)
		}
	})
}

// TestPlanesHaveSeparateBuckets: the control plane has its own limit, the
// same for every credential whatever its override, and spending one
// plane's budget leaves the other's whole.
func TestPlanesHaveSeparateBuckets(t *testing.T) {
	forEach(t, func(t *testing.T, mk func(Options) Limiter) {
		c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		l := mk(Options{RequestsPerMinute: 2, ControlRequestsPerMinute: 5, Now: c.Now})
		count := func(p *auth.Principal, plane Plane, n int) (ok int) {
			for range n {
				if allow(t, l, p, plane).Allowed {
					ok++
				}
			}
			return ok
		}
		a := key("a")
		over := &auth.Principal{ID: "o", Kind: auth.KindAPIKey, Policy: auth.Policy{RateLimit: &auth.RateLimit{RequestsPerMinute: 1}}}
		steps := []struct {
			name  string
			p     *auth.Principal
			plane Plane
			want  int
		}{
			{"control plane: its own limit", a, ControlPlane, 5},
			{"data plane: untouched by the control-plane calls", a, DataPlane, 2},
			{"control plane: still spent after the data-plane calls", a, ControlPlane, 0},
			{"override bounds the data plane", over, DataPlane, 1},
			{"override does not bound the control plane", over, ControlPlane, 5},
		}
		for _, st := range steps {
			t.Run(st.name, func(t *testing.T) {
				if got := count(st.p, st.plane, 10); got != st.want {
					t.Errorf("allowed %d of 10, want %d", got, st.want)
				}
			})
		}
		r := allow(t, l, a, ControlPlane)
		h := http.Header{}
		r.SetHeaders(h)
		if h.Get(HeaderLimit) != "5" || h.Get(HeaderPolicy) != "5;w=60" {
			t.Errorf("control-plane headers = %v", h)
		}
		if e := r.Err(); e.Details["limit"] != "controlPlaneRequestsPerMinute" || e.Details["plane"] != "control" {
			t.Errorf("control-plane error details = %v", e.Details)
		}
		off := mk(Options{RequestsPerMinute: 1})
		if r := allow(t, off, a, ControlPlane); !r.Allowed || r.Limit != 0 {
			t.Errorf("control-plane limit off = %+v", r)
		}
	})
}

func TestMemoryIsBounded(t *testing.T) {
	c := &clock{t: time.Now()}
	l := New(Options{RequestsPerMinute: 10, MaxBuckets: 64 * 8, Now: c.Now})
	for i := range 100_000 {
		l.AllowRequest(context.Background(), key("k"+strconv.Itoa(i)), DataPlane)
	}
	if n := l.Len(); n > 64*8 {
		t.Fatalf("%d buckets live, want at most %d", n, 64*8)
	}
}

func TestIdleBucketsAreSwept(t *testing.T) {
	c := &clock{t: time.Now()}
	l := New(Options{RequestsPerMinute: 10, Now: c.Now})
	for i := range 10_000 {
		l.AllowRequest(context.Background(), key("k"+strconv.Itoa(i)), DataPlane)
	}
	if n := l.Len(); n != 10_000 {
		t.Fatalf("%d buckets, want 10000", n)
	}
	// Two minutes later every bucket has refilled; 1024 fresh keys reach
	// every shard (all but certainly), each sweeping its shard.
	c.Add(2 * time.Minute)
	for i := range nShards * 16 {
		l.AllowRequest(context.Background(), key("fresh"+strconv.Itoa(i)), DataPlane)
	}
	if n := l.Len(); n > nShards*16 {
		t.Fatalf("%d buckets after the sweep, want only the fresh ones (<= %d)", n, nShards*16)
	}
}

// benchLimiters are the limiters the benchmarks compare: in memory, and
// in a real Redis on loopback, with every decision made there or with a
// second of the limit prefetched (the target: the shared limit
// adds at most 0.15 ms at p50 over the in-process one).
func benchLimiters(b *testing.B, o Options) []struct {
	name string
	l    Limiter
} {
	fb := &redisconn.Fallback{Closed: true, Timeout: 5 * time.Second}
	srv := redistest.New(b)
	prefetch := o
	prefetch.Prefetch = time.Second
	pl := NewRedis(redisClient(b, srv), prefetch, fb)
	b.Cleanup(pl.Close)
	return []struct {
		name string
		l    Limiter
	}{
		{"memory", New(o)},
		{"redis", NewRedis(redisClient(b, srv), o, fb)},
		{"redis prefetch", pl},
	}
}

// Run with:
//
//	go test ./server/ratelimit -run '^$' -bench 'AllowRequest|ReserveSettle' -benchmem
func BenchmarkAllowRequest(b *testing.B) {
	ctx := context.Background()
	for _, im := range benchLimiters(b, Options{RequestsPerMinute: 1 << 30}) {
		l := im.l
		b.Run(im.name+"/one credential", func(b *testing.B) {
			p := key("a")
			for b.Loop() {
				l.AllowRequest(ctx, p, DataPlane)
			}
		})
		b.Run(im.name+"/one credential with headers", func(b *testing.B) {
			p := key("a")
			h := http.Header{}
			for b.Loop() {
				r, _ := l.AllowRequest(ctx, p, DataPlane)
				r.SetHeaders(h)
			}
		})
		b.Run(im.name+"/one credential parallel", func(b *testing.B) {
			p := key("a")
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.AllowRequest(ctx, p, DataPlane)
				}
			})
		})
		b.Run(im.name+"/1000 credentials parallel", func(b *testing.B) {
			ps := make([]*auth.Principal, 1000)
			for i := range ps {
				ps[i] = key("key_" + strconv.Itoa(i))
			}
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(n.Add(1)) * 7919
				for pb.Next() {
					l.AllowRequest(ctx, ps[i%len(ps)], DataPlane)
					i++
				}
			})
		})
	}
}

func BenchmarkReserveSettle(b *testing.B) {
	// Each iteration uses 500 tokens: a budget no run of the benchmark exhausts.
	for _, im := range benchLimiters(b, Options{TokensPerMinute: 1 << 50}) {
		b.Run(im.name, func(b *testing.B) {
			p := key("a")
			ctx := WithHeader(context.Background(), http.Header{})
			for b.Loop() {
				r, err := im.l.Reserve(ctx, p, 1000)
				if err != nil {
					b.Fatal(err)
				}
				r.Settle(500)
			}
		})
	}
}

// TestAdmitCall: a model call's request and tokens are decided together,
// as AllowRequest then Reserve would: a refused request takes no tokens,
// refused tokens still count the request, and both sets of headers are
// written.
func TestAdmitCall(t *testing.T) {
	forEach(t, func(t *testing.T, mk func(Options) Limiter) {
		l, _ := newTest(mk, 2, 1000)
		p := key("a")
		h := http.Header{}
		ctx := WithHeader(context.Background(), h)
		req, res, err := l.AdmitCall(ctx, p, DataPlane, 600)
		if err != nil || !req.Allowed || res.Reserved() != 600 {
			t.Fatalf("first call = %+v %v %v, want admitted with 600 reserved", req, res, err)
		}
		if h.Get(HeaderRemaining) != "1" || h.Get(HeaderRemainingTokens) != "400" {
			t.Errorf("headers = %v, want 1 request and 400 tokens left", h)
		}
		// Tokens refused: the request is counted all the same.
		if req, _, err := l.AdmitCall(ctx, p, DataPlane, 600); !req.Allowed || !errors.Is(err, errs.RateLimited) {
			t.Fatalf("second call = %+v %v, want its request admitted and its tokens refused", req, err)
		}
		// The request bucket is empty now: refused, and no token is taken.
		req, res, err = l.AdmitCall(ctx, p, DataPlane, 100)
		if err != nil || req.Allowed || res != nil {
			t.Fatalf("third call = %+v %v %v, want its request refused", req, res, err)
		}
		if r, err := l.Reserve(context.Background(), p, 400); err != nil || r.Reserved() != 400 {
			t.Errorf("the 400 tokens left = %v %v, want all of them still there", r, err)
		}
	})
}
