package ratelimit

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/metrics"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redisconn"
)

// Redis keeps the buckets in a Redis server shared by every replica, so
// that a credential's limits hold across all of them with the same
// semantics and headers as Memory. Each decision is one round trip: a Lua
// script (EVALSHA) that refills the bucket by the Redis server's clock
// (TIME, so replicas with skewed clocks agree), takes or settles, and
// stores the bucket with an expiry at the moment it would be full again
// (a full bucket is indistinguishable from an absent one, so it is
// deleted).
//
// While Redis does not answer within redis.timeout, the Fallback decides:
// fail open admits without a limit (no headers), fail closed refuses
// with 503 unavailable. Nothing is cached: the next call after Redis is
// back is limited again. Buckets live in Redis's memory only; a Redis
// restart refills every bucket.
type Redis struct {
	policy
	client   redis.Scripter
	now      func() time.Time
	fallback *redisconn.Fallback
	settles  settles
}

// settles runs the settlement of reservations off the request path: a call
// answers without waiting for its refund to reach Redis. The next decision
// on the same bucket by this replica waits for the settlements before it,
// so one client's calls are counted in order.
type settles struct {
	mu       sync.Mutex
	inflight map[string]chan struct{} // closed when the bucket's latest settlement is done
	wg       sync.WaitGroup
}

// start runs fn after the bucket's earlier settlements.
func (s *settles) start(key string, fn func()) {
	done := make(chan struct{})
	s.mu.Lock()
	if s.inflight == nil {
		s.inflight = map[string]chan struct{}{}
	}
	prev := s.inflight[key]
	s.inflight[key] = done
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if prev != nil {
			<-prev
		}
		fn()
		close(done)
		s.mu.Lock()
		if s.inflight[key] == done {
			delete(s.inflight, key)
		}
		s.mu.Unlock()
	}()
}

// wait waits for the bucket's settlements in flight (or ctx).
func (s *settles) wait(ctx context.Context, key string) {
	s.mu.Lock()
	ch := s.inflight[key]
	s.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// Wait waits for every settlement in flight: call it before closing the
// Redis client.
func (l *Redis) Wait() { l.settles.wg.Wait() }

// NewRedis returns a limiter with the defaults of o whose buckets live in
// client. o.Now, when set, replaces the Redis server's clock (tests);
// o.MaxBuckets does not apply (keys expire instead).
func NewRedis(client redis.Scripter, o Options, fallback *redisconn.Fallback) *Redis {
	return &Redis{
		policy:   policy{rpm: o.RequestsPerMinute, tpm: o.TokensPerMinute, crpm: o.ControlRequestsPerMinute},
		client:   client,
		now:      o.Now,
		fallback: fallback,
	}
}

// bucketLua defines bucket(key, limit, op, amount, now): it refills the
// bucket at key to now (µs, or nil for the server's clock), then takes (op
// "take": the call needs min(amount, limit) and takes amount) or adjusts
// (op "adjust": adds amount, capped at the limit), and answers {allowed,
// tokens}; tokens may be negative (a debt).
const bucketLua = `
local function bucket(key, limit, op, amount, now)
  if now == nil then
    redis.replicate_commands()
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  local v = redis.call('HMGET', key, 't', 'u')
  local tokens, last = tonumber(v[1]), tonumber(v[2])
  if tokens == nil or last == nil then
    tokens, last = limit, now
  end
  if tokens > limit then tokens = limit end
  if now > last then
    tokens = math.min(limit, tokens + (now - last) * limit / 60000000)
    last = now
  end
  local allowed = 1
  if op == 'take' then
    if tokens >= math.min(amount, limit) then
      tokens = tokens - amount
    else
      allowed = 0
    end
  else
    tokens = math.min(limit, tokens + amount)
  end
  if tokens >= limit then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 't', string.format('%.17g', tokens), 'u', string.format('%d', last))
    redis.call('PEXPIRE', key, math.ceil((limit - tokens) * 60000 / limit) + 1)
  end
  return {allowed, string.format('%.17g', tokens)}
end
`

// bucketScript runs bucket on KEYS[1]: ARGV is limit, op, amount and the
// time in µs ("" for the server's clock).
var bucketScript = redis.NewScript(bucketLua + `
return bucket(KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
`)

// callScript counts a request in KEYS[1] (limit ARGV[1]) and, when it is
// admitted, takes ARGV[3] tokens from KEYS[2] (limit ARGV[2]; 0: no token
// limit): one round trip for a model call. It answers {request allowed,
// request tokens, tokens allowed, tokens left}.
var callScript = redis.NewScript(bucketLua + `
local now = tonumber(ARGV[4])
local r = bucket(KEYS[1], tonumber(ARGV[1]), 'take', 1, now)
if r[1] == 0 or tonumber(ARGV[2]) <= 0 then
  return {r[1], r[2], 1, '0'}
end
local t = bucket(KEYS[2], tonumber(ARGV[2]), 'take', tonumber(ARGV[3]), now)
return {r[1], r[2], t[1], t[2]}
`)

// redisKey names a bucket; the braces keep a credential's buckets in one
// Redis Cluster slot.
func redisKey(k bucketKey) string {
	return "switchboard:ratelimit:{" + k.kind + ":" + k.id + "}:" + k.dim.String()
}

// run executes the bucket script: op "take" or "adjust".
func (l *Redis) run(ctx context.Context, k bucketKey, limit int, op string, amount float64) (allowed bool, tokens float64, err error) {
	now := ""
	if l.now != nil {
		now = strconv.FormatInt(l.now().UnixMicro(), 10)
	}
	if op == "take" {
		l.settles.wait(ctx, redisKey(k))
	}
	ctx, cancel := l.fallback.Context(ctx)
	defer cancel()
	res, err := bucketScript.Run(ctx, l.client, []string{redisKey(k)},
		limit, op, strconv.FormatFloat(amount, 'g', -1, 64), now).Slice()
	if err != nil {
		return false, 0, err
	}
	if len(res) != 2 {
		return false, 0, redis.Nil
	}
	a, _ := res[0].(int64)
	s, _ := res[1].(string)
	tokens, err = strconv.ParseFloat(s, 64)
	return a == 1, tokens, err
}

// take removes n from the bucket when it holds at least min(n, limit).
func (l *Redis) take(ctx context.Context, k bucketKey, limit, n int) (Result, error) {
	allowed, tokens, err := l.run(ctx, k, limit, "take", float64(n))
	if err != nil {
		return Result{}, err
	}
	return takeResult(k, limit, n, allowed, tokens), nil
}

// takeResult is the Result of taking n from a bucket that answered
// allowed with tokens left, computed as Memory computes it.
func takeResult(k bucketKey, limit, n int, allowed bool, tokens float64) Result {
	rate := float64(limit) / float64(time.Minute)
	res := Result{Dimension: k.dim, Limit: limit, Allowed: allowed}
	if !allowed {
		res.RetryAfter = nanos((float64(min(n, limit)) - tokens) / rate)
	}
	res.Remaining = int(math.Max(0, math.Floor(tokens)))
	res.Reset = nanos((float64(limit) - tokens) / rate)
	return res
}

// AdmitCall counts one request of p on plane and reserves n tokens in one
// round trip (callScript), with the semantics of AllowRequest then
// Reserve; the request's headers are written to the response headers
// carried by ctx with the token headers. While Redis does not answer it
// admits without a limit (fail open) or fails with errs.Unavailable.
func (l *Redis) AdmitCall(ctx context.Context, p *auth.Principal, plane Plane, n int) (Result, *Reservation, error) {
	rk, rpm := l.requestBucket(p, plane)
	tk, tpm := l.tokenBucket(p)
	if rpm <= 0 {
		res, err := l.Reserve(ctx, p, n)
		return Result{Allowed: true}, res, err
	}
	n = max(n, 1)
	now := ""
	if l.now != nil {
		now = strconv.FormatInt(l.now().UnixMicro(), 10)
	}
	if tpm > 0 {
		l.settles.wait(ctx, redisKey(tk))
	}
	rctx, cancel := l.fallback.Context(ctx)
	defer cancel()
	out, err := callScript.Run(rctx, l.client, []string{redisKey(rk), redisKey(tk)},
		rpm, tpm, n, now).Slice()
	if err == nil && len(out) != 4 {
		err = redis.Nil
	}
	if err != nil {
		if err := l.fallback.Failed("ratelimit", err); err != nil {
			return Result{}, nil, err
		}
		return Result{Allowed: true}, nil, nil
	}
	ra, _ := out[0].(int64)
	rs, _ := out[1].(string)
	rtokens, _ := strconv.ParseFloat(rs, 64)
	req := takeResult(rk, rpm, 1, ra == 1, rtokens)
	if h := headerFrom(ctx); h != nil {
		req.SetHeaders(h)
	}
	if !req.Allowed {
		metrics.RateLimited(rk.dim.String(), p.Kind)
		return req, nil, nil
	}
	if tpm <= 0 {
		return req, nil, nil
	}
	ta, _ := out[2].(int64)
	ts, _ := out[3].(string)
	ttokens, _ := strconv.ParseFloat(ts, 64)
	res, err := reserved(ctx, l, tk, tpm, n, takeResult(tk, tpm, n, ta == 1, ttokens))
	return req, res, err
}

// AllowRequest counts one request of p against its requests-per-minute
// limit on plane, as Memory does, in the bucket every replica shares.
// While Redis does not answer it admits without a limit (fail open) or
// fails with errs.Unavailable (fail closed).
func (l *Redis) AllowRequest(ctx context.Context, p *auth.Principal, plane Plane) (Result, error) {
	k, rpm := l.requestBucket(p, plane)
	if rpm <= 0 {
		return Result{Allowed: true}, nil
	}
	r, err := l.take(ctx, k, rpm, 1)
	if err != nil {
		if err := l.fallback.Failed("ratelimit", err); err != nil {
			return Result{}, err
		}
		return Result{Allowed: true}, nil
	}
	if !r.Allowed {
		metrics.RateLimited(k.dim.String(), p.Kind)
	}
	return r, nil
}

// Reserve takes n tokens from p's shared tokens-per-minute bucket, as
// Memory does. While Redis does not answer it admits with a nil
// Reservation (fail open) or fails with errs.Unavailable (fail closed).
func (l *Redis) Reserve(ctx context.Context, p *auth.Principal, n int) (*Reservation, error) {
	k, tpm := l.tokenBucket(p)
	if tpm <= 0 {
		return nil, nil
	}
	n = max(n, 1)
	r, err := l.take(ctx, k, tpm, n)
	if err != nil {
		return nil, l.fallback.Failed("ratelimit", err)
	}
	return reserved(ctx, l, k, tpm, n, r)
}

// adjust settles a reservation in the shared bucket, in the background
// (see settles). A settle that cannot reach Redis is counted and logged;
// the bucket then keeps the worst case until it refills.
func (l *Redis) adjust(k bucketKey, limit int, delta float64) {
	l.settles.start(redisKey(k), func() {
		if _, _, err := l.run(context.Background(), k, limit, "adjust", delta); err != nil {
			l.fallback.Lost("ratelimit", err)
		}
	})
}
