package ratelimit

import (
	"context"
	"math"
	"strconv"
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
}

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

// bucketScript refills KEYS[1] to now, then takes (ARGV[2] "take": the
// call needs min(amount, limit) and takes amount) or adjusts (ARGV[2]
// "adjust": adds amount, capped at the limit). ARGV[1] is the limit per
// minute, ARGV[4] the time in µs or "" for the server's clock. It answers
// {allowed, tokens}; tokens may be negative (a debt).
var bucketScript = redis.NewScript(`
local limit = tonumber(ARGV[1])
local amount = tonumber(ARGV[3])
local now
if ARGV[4] ~= '' then
  now = tonumber(ARGV[4])
else
  redis.replicate_commands()
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local v = redis.call('HMGET', KEYS[1], 't', 'u')
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
if ARGV[2] == 'take' then
  if tokens >= math.min(amount, limit) then
    tokens = tokens - amount
  else
    allowed = 0
  end
else
  tokens = math.min(limit, tokens + amount)
end
if tokens >= limit then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'u', string.format('%d', last))
  redis.call('PEXPIRE', KEYS[1], math.ceil((limit - tokens) * 60000 / limit) + 1)
end
return {allowed, string.format('%.17g', tokens)}
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
// The result is computed as Memory computes it.
func (l *Redis) take(ctx context.Context, k bucketKey, limit, n int) (Result, error) {
	allowed, tokens, err := l.run(ctx, k, limit, "take", float64(n))
	if err != nil {
		return Result{}, err
	}
	rate := float64(limit) / float64(time.Minute)
	res := Result{Dimension: k.dim, Limit: limit, Allowed: allowed}
	if !allowed {
		res.RetryAfter = nanos((float64(min(n, limit)) - tokens) / rate)
	}
	res.Remaining = int(math.Max(0, math.Floor(tokens)))
	res.Reset = nanos((float64(limit) - tokens) / rate)
	return res, nil
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

// adjust settles a reservation in the shared bucket. A settle that cannot
// reach Redis is counted and logged; the bucket then keeps the worst case
// until it refills.
func (l *Redis) adjust(k bucketKey, limit int, delta float64) {
	if _, _, err := l.run(context.Background(), k, limit, "adjust", delta); err != nil {
		l.fallback.Lost("ratelimit", err)
	}
}
