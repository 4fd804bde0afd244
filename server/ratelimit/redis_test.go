package ratelimit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

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
