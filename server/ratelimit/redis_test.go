package ratelimit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/metrics"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redisconn"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redistest"
)

// TestRedis_TwoReplicasShareOneBucket: two limiters on one Redis (two
// replicas, on the Redis server's clock) spend one bucket per credential:
// requests alternating between them are admitted up to the limit in
// total, and tokens reserved through one are missing on the other until
// they are settled.
func TestRedis_TwoReplicasShareOneBucket(t *testing.T) {
	srv := redistest.New(t)
	fb := &redisconn.Fallback{Closed: true, Timeout: 5 * time.Second}
	o := Options{RequestsPerMinute: 10, TokensPerMinute: 1000}
	replicas := []Limiter{NewRedis(redisClient(t, srv), o, fb), NewRedis(redisClient(t, srv), o, fb)}
	p := key("a")
	t.Run("requests: the limit holds in total", func(t *testing.T) {
		allowed := 0
		var last Result
		for i := range 20 {
			last = allow(t, replicas[i%2], p, DataPlane)
			if last.Allowed {
				allowed++
			}
		}
		if allowed != 10 {
			t.Fatalf("admitted %d of 20 over two replicas, want 10 (the limit)", allowed)
		}
		if last.Remaining != 0 || last.Limit != 10 {
			t.Errorf("last result = %+v, want the shared bucket empty", last)
		}
	})
	t.Run("tokens: a reservation on one replica holds on the other", func(t *testing.T) {
		ctx := context.Background()
		r, err := replicas[0].Reserve(ctx, p, 600)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		if _, err := replicas[1].Reserve(WithHeader(ctx, h), p, 600); !errors.Is(err, errs.RateLimited) {
			t.Fatalf("second replica reserving 600 of the 400 left = %v, want rate_limited", err)
		}
		if rem, _ := strconv.Atoi(h.Get(HeaderRemainingTokens)); rem < 399 || rem > 401 {
			t.Errorf("remaining on the second replica = %q, want about 400", h.Get(HeaderRemainingTokens))
		}
		r.Settle(100)
		replicas[0].(*Redis).Wait() // settlements run in the background
		if _, err := replicas[1].Reserve(ctx, p, 850); err != nil {
			t.Fatalf("after settling on the first replica, the second cannot reserve 850: %v", err)
		}
	})
}

// TestRedis_BucketExpiresWhenFull: a bucket's key expires when it would
// be full again, and a bucket refilled by a settle is deleted at once.
func TestRedis_BucketExpiresWhenFull(t *testing.T) {
	srv := redistest.New(t)
	c := redisClient(t, srv)
	l := NewRedis(c, Options{RequestsPerMinute: 60, TokensPerMinute: 600}, &redisconn.Fallback{Closed: true, Timeout: 5 * time.Second})
	p := key("a")
	allow(t, l, p, DataPlane)
	ttl := c.PTTL(context.Background(), redisKey(bucketKey{Requests, p.Kind, p.ID})).Val()
	if ttl <= 0 || ttl > 1001*time.Millisecond {
		t.Errorf("TTL after one request of 60 per minute = %v, want about 1 s (until it is full)", ttl)
	}
	r, err := l.Reserve(context.Background(), p, 100)
	if err != nil {
		t.Fatal(err)
	}
	tk := redisKey(bucketKey{Tokens, p.Kind, p.ID})
	if n := c.Exists(context.Background(), tk).Val(); n != 1 {
		t.Fatal("token bucket missing after a reservation")
	}
	r.Settle(0)
	l.Wait()
	if n := c.Exists(context.Background(), tk).Val(); n != 0 {
		t.Error("token bucket still stored after settling to full")
	}
}

// TestRedis_Outage: while Redis is down, fail open admits without a
// limit (counted in switchboard_redis_unavailable_total, logged once, not
// per request) and fail closed refuses with unavailable; once Redis is
// back the limit applies again without a new limiter.
func TestRedis_Outage(t *testing.T) {
	for _, closed := range []bool{false, true} {
		mode := map[bool]string{false: "open", true: "closed"}[closed]
		t.Run("fail "+mode, func(t *testing.T) {
			srv := redistest.New(t)
			var logs bytes.Buffer
			fb := &redisconn.Fallback{Closed: closed, Timeout: time.Second, Log: slog.New(slog.NewTextHandler(&logs, nil)), LogEvery: time.Hour}
			l := NewRedis(redisClient(t, srv), Options{RequestsPerMinute: 1, TokensPerMinute: 100}, fb)
			p := key("a")
			ctx := context.Background()
			if r := allow(t, l, p, DataPlane); !r.Allowed {
				t.Fatalf("first request = %+v", r)
			}
			if err := srv.Stop(); err != nil {
				t.Fatal(err)
			}
			before := unavailable(t, "ratelimit", mode)
			for range 3 {
				r, err := l.AllowRequest(ctx, p, DataPlane)
				if closed {
					if !errors.Is(err, errs.Unavailable) {
						t.Fatalf("request while Redis is down = %+v, %v; want unavailable", r, err)
					}
				} else if err != nil || !r.Allowed || r.Limit != 0 {
					t.Fatalf("request while Redis is down = %+v, %v; want admitted without a limit", r, err)
				}
			}
			res, err := l.Reserve(ctx, p, 10)
			if closed != errors.Is(err, errs.Unavailable) || res != nil {
				t.Fatalf("reservation while Redis is down = %v, %v", res, err)
			}
			if got := unavailable(t, "ratelimit", mode) - before; got != 4 {
				t.Errorf("switchboard_redis_unavailable_total grew by %v, want 4", got)
			}
			if n := strings.Count(logs.String(), "redis: not answering"); n != 1 {
				t.Errorf("logged %d reports for 4 failures, want 1:\n%s", n, logs.String())
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			// Redis restarted empty: the bucket is full again, then limits.
			if r := allow(t, l, p, DataPlane); !r.Allowed || r.Limit != 1 {
				t.Fatalf("first request after Redis is back = %+v", r)
			}
			if r := allow(t, l, p, DataPlane); r.Allowed {
				t.Fatalf("second request after Redis is back = %+v, want refused", r)
			}
		})
	}
}

// unavailable reads switchboard_redis_unavailable_total{use, fail_mode}.
func unavailable(t *testing.T, use, mode string) float64 {
	t.Helper()
	var b bytes.Buffer
	if err := metrics.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	prefix := `switchboard_redis_unavailable_total{fail_mode="` + mode + `",use="` + use + `"} `
	for line := range strings.SplitSeq(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TestRedis_SettlementRunsBeforeTheNextDecision: a settlement runs in the
// background, but this replica's next decision on the bucket waits for it,
// so a client's calls are counted in order.
func TestRedis_SettlementRunsBeforeTheNextDecision(t *testing.T) {
	srv := redistest.New(t)
	l := NewRedis(redisClient(t, srv), Options{RequestsPerMinute: 60, TokensPerMinute: 1000}, &redisconn.Fallback{Closed: true, Timeout: 5 * time.Second})
	p := key("a")
	ctx := context.Background()
	for i := range 20 {
		r, err := l.Reserve(ctx, p, 900)
		if err != nil {
			t.Fatalf("reservation %d of 900 after the previous one was refunded: %v", i, err)
		}
		r.Settle(0)
	}
}

// roundTrips counts the scripts Redis has run (EVALSHA and EVAL), less
// the EVALSHA refused before the script was loaded.
func roundTrips(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				for f := range strings.SplitSeq(v, ",") {
					name, val, _ := strings.Cut(f, "=")
					k, _ := strconv.Atoi(val)
					switch name {
					case "calls":
						n += k
					case "failed_calls":
						n -= k
					}
				}
			}
		}
	}
	return n
}

// shared reads what the bucket of p's dimension holds in Redis (full when
// absent).
func shared(t *testing.T, c *redis.Client, p *auth.Principal, dim Dimension, limit int) float64 {
	t.Helper()
	v, err := c.HGet(context.Background(), redisKey(bucketKey{dim, p.Kind, p.ID}), "t").Result()
	if errors.Is(err, redis.Nil) {
		return float64(limit)
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRedis_Prefetch: with Prefetch, a replica takes up to that much of a
// limit's refill rate ahead and decides from it without a round trip; the
// replicas together never admit more than the limit, what one holds comes
// back when it idles, on Flush and on Close, and a bucket close to empty
// is decided in Redis.
func TestRedis_Prefetch(t *testing.T) {
	fb := &redisconn.Fallback{Closed: true, Timeout: 5 * time.Second}
	ctx := context.Background()
	// newReplicas starts n limiters on one Redis with a manual clock (which
	// is also Redis's: the buckets refill only when the test says so).
	newReplicas := func(t *testing.T, n int, o Options) ([]*Redis, *redis.Client, *clock) {
		srv := redistest.New(t)
		clk := newClock()
		o.Now = clk.Now
		ls := make([]*Redis, n)
		for i := range ls {
			ls[i] = NewRedis(redisClient(t, srv), o, fb)
			t.Cleanup(ls[i].Close)
		}
		return ls, redisClient(t, srv), clk
	}

	t.Run("decisions within the allotment make no round trip", func(t *testing.T) {
		ls, c, _ := newReplicas(t, 1, Options{RequestsPerMinute: 600, Prefetch: time.Second})
		p := key("a")
		before := roundTrips(t, c)
		for i := range 11 { // one round trip takes 1 and leases 10 (1 s of 600/min)
			r := allow(t, ls[0], p, DataPlane)
			if !r.Allowed || r.Remaining != 600-1-i {
				t.Fatalf("request %d = %+v, want admitted with %d left", i+1, r, 600-1-i)
			}
		}
		if got := roundTrips(t, c) - before; got != 1 {
			t.Errorf("11 requests made %d round trips, want 1", got)
		}
		allow(t, ls[0], p, DataPlane)
		if got := roundTrips(t, c) - before; got != 2 {
			t.Errorf("the 12th request made %d round trips in all, want 2 (the allotment was spent)", got)
		}
	})

	t.Run("without prefetch every decision is a round trip", func(t *testing.T) {
		ls, c, _ := newReplicas(t, 1, Options{RequestsPerMinute: 600})
		p := key("a")
		before := roundTrips(t, c)
		for range 5 {
			allow(t, ls[0], p, DataPlane)
		}
		if got := roundTrips(t, c) - before; got != 5 {
			t.Errorf("5 requests made %d round trips, want 5", got)
		}
	})

	t.Run("replicas together admit exactly the limit", func(t *testing.T) {
		const limit = 600
		ls, _, _ := newReplicas(t, 3, Options{RequestsPerMinute: limit, Prefetch: time.Second})
		p := key("a")
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Go(func() {
				for i := range 200 {
					r, err := ls[(w+i)%3].AllowRequest(ctx, p, DataPlane)
					if err != nil {
						t.Error(err)
						return
					}
					if r.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		// Allotments still held are not admitted yet: spend them, then the
		// limit is reached on every replica.
		for _, l := range ls {
			for allow(t, l, p, DataPlane).Allowed {
				admitted.Add(1)
			}
		}
		if got := admitted.Load(); got != limit {
			t.Errorf("1200 requests over 3 replicas admitted %d, want %d (the clock stands still)", got, limit)
		}
	})

	t.Run("what an idle replica holds goes back", func(t *testing.T) {
		const limit = 6000
		ls, c, clk := newReplicas(t, 2, Options{RequestsPerMinute: limit, Prefetch: time.Second})
		p := key("a")
		allow(t, ls[0], p, DataPlane) // takes 1, holds 100
		if got := shared(t, c, p, Requests, limit); got != limit-101 {
			t.Fatalf("Redis holds %v after one request, want %d (1 spent, 100 held by the replica)", got, limit-101)
		}
		if r := allow(t, ls[1], p, DataPlane); r.Remaining != limit-102 {
			t.Errorf("the other replica reports %d left, want %d: the first replica's allotment is missing there", r.Remaining, limit-102)
		}
		clk.Add(3 * time.Second) // both idle for longer than Prefetch (Redis refills 300)
		deadline := time.Now().Add(5 * time.Second)
		for shared(t, c, p, Requests, limit) < limit && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := shared(t, c, p, Requests, limit); got != limit {
			t.Errorf("Redis holds %v once both replicas idle, want the full %d", got, limit)
		}
	})

	t.Run("flush and close give allotments back", func(t *testing.T) {
		const limit = 6000
		ls, c, _ := newReplicas(t, 2, Options{RequestsPerMinute: limit, Prefetch: time.Second})
		p := key("a")
		allow(t, ls[0], p, DataPlane)
		allow(t, ls[1], p, DataPlane)
		ls[0].Flush()
		if got := shared(t, c, p, Requests, limit); got != limit-102 {
			t.Errorf("Redis holds %v after the first replica flushed, want %d (2 spent, 100 held by the second)", got, limit-102)
		}
		ls[1].Close()
		if got := shared(t, c, p, Requests, limit); got != limit-2 {
			t.Errorf("Redis holds %v after the second replica closed, want %d", got, limit-2)
		}
	})

	t.Run("a bucket close to empty is decided in Redis", func(t *testing.T) {
		const limit = 600
		ls, c, _ := newReplicas(t, 1, Options{RequestsPerMinute: limit, Prefetch: time.Second})
		p := key("a")
		for allow(t, ls[0], p, DataPlane).Remaining >= 16 { // spend down
		}
		ls[0].Flush() // Redis holds the 15 left, the replica nothing
		before := roundTrips(t, c)
		n := 0
		for allow(t, ls[0], p, DataPlane).Allowed {
			n++
		}
		if got := roundTrips(t, c) - before; got != n+1 {
			t.Errorf("the last %d requests and the refusal made %d round trips, want %d (no lease below 16 left)", n, got, n+1)
		}
	})

	t.Run("refunds fill the allotment and the rest goes back, charges are paid", func(t *testing.T) {
		const limit = 60000
		ls, c, _ := newReplicas(t, 1, Options{TokensPerMinute: limit, Prefetch: time.Second})
		p := key("a")
		r, err := ls[0].Reserve(ctx, p, 2000) // takes 2000, leases 1000
		if err != nil {
			t.Fatal(err)
		}
		r.Settle(0) // 2000 back: the allotment holds at most 1000, the rest goes to Redis
		ls[0].Wait()
		if got := shared(t, c, p, Tokens, limit); got != limit-1000 {
			t.Errorf("Redis holds %v after a refund, want %d (the allotment held back)", got, limit-1000)
		}
		r, err = ls[0].Reserve(ctx, p, 500) // from the allotment
		if err != nil {
			t.Fatal(err)
		}
		r.Settle(1800) // 1300 more than reserved: the allotment owes 800
		ls[0].Flush()
		if got := shared(t, c, p, Tokens, limit); got != limit-1800 {
			t.Errorf("Redis holds %v after a charge beyond the reservation, want %d (1800 used in all)", got, limit-1800)
		}
	})

	t.Run("a model call within both allotments makes no round trip", func(t *testing.T) {
		ls, c, _ := newReplicas(t, 1, Options{RequestsPerMinute: 600, TokensPerMinute: 60000, Prefetch: time.Second})
		p := key("a")
		h := http.Header{}
		before := roundTrips(t, c)
		for i := range 5 {
			req, res, err := ls[0].AdmitCall(WithHeader(ctx, h), p, DataPlane, 100)
			if err != nil || !req.Allowed || res.Reserved() != 100 {
				t.Fatalf("call %d = %+v %v %v", i+1, req, res, err)
			}
			if h.Get(HeaderRemaining) != strconv.Itoa(600-1-i) || h.Get(HeaderRemainingTokens) != strconv.Itoa(60000-100*(i+1)) {
				t.Errorf("call %d headers = %v, want %d requests and %d tokens left", i+1, h, 600-1-i, 60000-100*(i+1))
			}
			res.Settle(100)
			h = http.Header{}
		}
		if got := roundTrips(t, c) - before; got != 1 {
			t.Errorf("5 calls made %d round trips, want 1", got)
		}
	})
}
