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
// semantics and headers as Memory. A decision is at most one round trip:
// a Lua script (EVALSHA) that refills the bucket by the Redis server's
// clock (TIME, so replicas with skewed clocks agree), takes or settles,
// and stores the bucket with an expiry at the moment it would be full
// again (a full bucket is indistinguishable from an absent one, so it is
// deleted). With Options.Prefetch, most decisions make none: they spend
// what the last round trip took ahead for this replica (prefetch.go).
//
// While Redis does not answer within redis.timeout, the Fallback decides:
// fail open admits without a limit (no headers), fail closed refuses
// with 503 unavailable. An allotment taken before the outage is still
// spent; nothing else is cached: the next round trip after Redis is back
// is limited again. Buckets live in Redis's memory only; a Redis
// restart refills every bucket.
type Redis struct {
	policy
	client   redis.Scripter
	now      func() time.Time
	fallback *redisconn.Fallback
	settles  settles
	allot    allotments
	stop     chan struct{} // closed by Close; nil without prefetch
	stopped  chan struct{}
	stopOnce sync.Once
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

// Wait waits for every settlement in flight (not for allotments: see
// Flush).
func (l *Redis) Wait() { l.settles.wg.Wait() }

// NewRedis returns a limiter with the defaults of o whose buckets live in
// client. o.Now, when set, replaces the Redis server's clock (tests);
// o.MaxBuckets does not apply (keys expire instead).
func NewRedis(client redis.Scripter, o Options, fallback *redisconn.Fallback) *Redis {
	l := &Redis{
		policy:   policy{rpm: o.RequestsPerMinute, tpm: o.TokensPerMinute, crpm: o.ControlRequestsPerMinute},
		client:   client,
		now:      o.Now,
		fallback: fallback,
		allot:    allotments{window: o.Prefetch},
	}
	if o.Prefetch > 0 {
		l.stop, l.stopped = make(chan struct{}), make(chan struct{})
		go l.sweep(o.Prefetch)
	}
	return l
}

// bucketLua defines bucket(key, limit, op, amount, now, back, lease): it
// refills the bucket at key to now (µs, or nil for the server's clock),
// then takes (op "take": adds back, what a replica's allotment returns;
// the call needs min(amount, limit) and takes amount; when it is allowed,
// up to lease more, at most a sixteenth of what is left, go to the
// replica's allotment) or adjusts (op "adjust": adds amount, capped at the
// limit), and answers {allowed, tokens, leased}; tokens may be negative (a
// debt).
const bucketLua = `
local function bucket(key, limit, op, amount, now, back, lease)
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
  local allowed, leased = 1, 0
  if op == 'take' then
    tokens = math.min(limit, tokens + back)
    if tokens >= math.min(amount, limit) then
      tokens = tokens - amount
      if lease > 0 and tokens >= 16 then
        leased = math.floor(math.min(lease, tokens / 16))
        tokens = tokens - leased
      end
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
  return {allowed, string.format('%.17g', tokens), leased}
end
`

// bucketScript runs bucket on KEYS[1]: ARGV is limit, op, amount, the
// time in µs ("" for the server's clock), back and lease.
var bucketScript = redis.NewScript(bucketLua + `
return bucket(KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]))
`)

// callScript counts a request in KEYS[1] (limit ARGV[1]) and, when it is
// admitted, takes ARGV[3] tokens from KEYS[2] (limit ARGV[2]; 0: no token
// limit): one round trip for a model call. ARGV[4] is the time, ARGV[5..8]
// the back and lease of each bucket; a refused request still gives the
// token bucket its back. It answers {request allowed, request tokens,
// request leased, tokens allowed, tokens left, tokens leased}.
var callScript = redis.NewScript(bucketLua + `
local now, tpm = tonumber(ARGV[4]), tonumber(ARGV[2])
local r = bucket(KEYS[1], tonumber(ARGV[1]), 'take', 1, now, tonumber(ARGV[5]), tonumber(ARGV[6]))
if r[1] == 0 or tpm <= 0 then
  if tpm > 0 and tonumber(ARGV[7]) ~= 0 then
    bucket(KEYS[2], tpm, 'adjust', tonumber(ARGV[7]), now, 0, 0)
  end
  return {r[1], r[2], r[3], 1, '0', 0}
end
local t = bucket(KEYS[2], tpm, 'take', tonumber(ARGV[3]), now, tonumber(ARGV[7]), tonumber(ARGV[8]))
return {r[1], r[2], r[3], t[1], t[2], t[3]}
`)

// redisKey names a bucket; the braces keep a credential's buckets in one
// Redis Cluster slot.
func redisKey(k bucketKey) string {
	return "switchboard:ratelimit:{" + k.kind + ":" + k.id + "}:" + k.dim.String()
}

// redisNow is the time argument of the scripts: "" for the Redis server's
// clock, o.Now in tests.
func (l *Redis) redisNow() string {
	if l.now == nil {
		return ""
	}
	return strconv.FormatInt(l.now().UnixMicro(), 10)
}

// clock is the time of allotments.
func (l *Redis) clock() time.Time {
	if l.now == nil {
		return time.Now()
	}
	return l.now()
}

// decision is one bucket's part of a script's answer.
type decision struct {
	allowed bool
	tokens  float64
	leased  float64
}

// decisions reads a script's answer: three values per bucket.
func decisions(res []any, err error) ([]decision, error) {
	if err != nil {
		return nil, err
	}
	if len(res) == 0 || len(res)%3 != 0 {
		return nil, redis.Nil
	}
	out := make([]decision, len(res)/3)
	for i := range out {
		a, _ := res[3*i].(int64)
		s, _ := res[3*i+1].(string)
		g, _ := res[3*i+2].(int64)
		tokens, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		out[i] = decision{allowed: a == 1, tokens: tokens, leased: float64(g)}
	}
	return out, nil
}

// run executes the bucket script on key: op "take" (with back and lease)
// or "adjust".
func (l *Redis) run(ctx context.Context, key string, limit int, op string, amount, back float64, lease int) (decision, error) {
	if op == "take" {
		l.settles.wait(ctx, key)
	}
	ctx, cancel := l.fallback.Context(ctx)
	defer cancel()
	d, err := decisions(bucketScript.Run(ctx, l.client, []string{key},
		limit, op, strconv.FormatFloat(amount, 'g', -1, 64), l.redisNow(),
		strconv.FormatFloat(back, 'g', -1, 64), lease).Slice())
	if err != nil {
		return decision{}, err
	}
	return d[0], nil
}

// take removes n from the bucket when it holds at least min(n, limit):
// from this replica's allotment when it holds n, else in Redis, which
// also tops the allotment up.
func (l *Redis) take(ctx context.Context, k bucketKey, limit, n int) (Result, error) {
	key := redisKey(k)
	al := l.allot.get(key, limit)
	if left, ok := al.take(limit, n, l.clock()); ok {
		return takeResult(k, limit, n, true, left), nil
	}
	back := al.drain(limit)
	d, err := l.run(ctx, key, limit, "take", float64(n), back, l.allot.lease(limit))
	if err != nil {
		al.restore(back)
		return Result{}, err
	}
	return takeResult(k, limit, n, d.allowed, al.refill(d.tokens, d.leased, l.clock())), nil
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

// AdmitCall counts one request of p on plane and reserves n tokens, with
// the semantics of AllowRequest then Reserve, in at most one round trip
// (callScript), none when this replica's allotments cover both; the
// request's headers are written to the response headers carried by ctx
// with the token headers. While Redis does not answer it admits without a
// limit (fail open) or fails with errs.Unavailable.
func (l *Redis) AdmitCall(ctx context.Context, p *auth.Principal, plane Plane, n int) (Result, *Reservation, error) {
	rk, rpm := l.requestBucket(p, plane)
	tk, tpm := l.tokenBucket(p)
	if rpm <= 0 {
		res, err := l.Reserve(ctx, p, n)
		return Result{Allowed: true}, res, err
	}
	n = max(n, 1)
	rkey, tkey := redisKey(rk), redisKey(tk)
	ra := l.allot.get(rkey, rpm)
	if left, ok := ra.take(rpm, 1, l.clock()); ok {
		// The request is admitted here; the tokens cost a round trip only
		// when their allotment does not hold n.
		req := takeResult(rk, rpm, 1, true, left)
		admitted(ctx, req)
		res, err := l.Reserve(ctx, p, n)
		return req, res, err
	}
	var ta *allotment
	if tpm > 0 {
		ta = l.allot.get(tkey, tpm)
		l.settles.wait(ctx, tkey)
	}
	backR, backT := ra.drain(rpm), ta.drain(tpm)
	rctx, cancel := l.fallback.Context(ctx)
	defer cancel()
	d, err := decisions(callScript.Run(rctx, l.client, []string{rkey, tkey},
		rpm, tpm, n, l.redisNow(),
		strconv.FormatFloat(backR, 'g', -1, 64), l.allot.lease(rpm),
		strconv.FormatFloat(backT, 'g', -1, 64), l.allot.lease(tpm)).Slice())
	if err == nil && len(d) != 2 {
		err = redis.Nil
	}
	if err != nil {
		ra.restore(backR)
		ta.restore(backT)
		if err := l.fallback.Failed("ratelimit", err); err != nil {
			return Result{}, nil, err
		}
		return Result{Allowed: true}, nil, nil
	}
	now := l.clock()
	req := takeResult(rk, rpm, 1, d[0].allowed, ra.refill(d[0].tokens, d[0].leased, now))
	admitted(ctx, req)
	if !req.Allowed {
		metrics.RateLimited(rk.dim.String(), p.Kind)
		return req, nil, nil
	}
	if tpm <= 0 {
		return req, nil, nil
	}
	tleft := ta.refill(d[1].tokens, d[1].leased, now)
	res, err := reserved(ctx, l, tk, tpm, n, takeResult(tk, tpm, n, d[1].allowed, tleft))
	return req, res, err
}

// admitted writes a request's headers to the response headers carried by
// ctx.
func admitted(ctx context.Context, req Result) {
	if h := headerFrom(ctx); h != nil {
		req.SetHeaders(h)
	}
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

// adjust settles a reservation: into this replica's allotment of the
// bucket, up to its size, and the rest in Redis in the background (see
// settles). A settle that cannot reach Redis is counted and logged; the
// bucket then keeps the worst case until it refills.
func (l *Redis) adjust(k bucketKey, limit int, delta float64) {
	key := redisKey(k)
	if al := l.allot.get(key, limit); al != nil {
		if delta = al.credit(delta, l.allot.lease(limit), l.clock()); delta == 0 {
			return
		}
	}
	l.giveBack(key, limit, delta)
}

// giveBack adds delta (negative to charge) to the shared bucket at key in
// the background, after the bucket's earlier settlements.
func (l *Redis) giveBack(key string, limit int, delta float64) {
	l.settles.start(key, func() {
		if _, err := l.run(context.Background(), key, limit, "adjust", delta, 0, 0); err != nil {
			l.fallback.Lost("ratelimit", err)
		}
	})
}

// returnIdle gives back the allotments unused since before cutoff and
// forgets those left empty since before forget. Forgetting races with a
// decision that holds the allotment: what that decision leases is then
// missing from the bucket until it refills (at most Prefetch).
func (l *Redis) returnIdle(cutoff, forget time.Time) {
	l.allot.m.Range(func(k, v any) bool {
		al := v.(*allotment)
		if back, ok := al.idle(cutoff); ok {
			l.giveBack(k.(string), al.limit, back)
		} else if al.forgettable(forget) {
			l.allot.m.Delete(k)
		}
		return true
	})
}

// Flush gives every allotment of this replica back to Redis and waits for
// every settlement in flight: the shared buckets then hold exactly what
// this replica has not spent (tests; shutdown).
func (l *Redis) Flush() {
	l.returnIdle(farFuture, time.Time{})
	l.Wait()
}

// farFuture is a cutoff every allotment was last used before.
var farFuture = time.Unix(1<<40, 0)

// Close stops giving back idle allotments in the background and flushes:
// call it before closing the Redis client.
func (l *Redis) Close() {
	l.stopOnce.Do(func() {
		if l.stop != nil {
			close(l.stop)
			<-l.stopped
		}
	})
	l.Flush()
}

// sweep gives idle allotments back every half window until Close.
func (l *Redis) sweep(window time.Duration) {
	defer close(l.stopped)
	t := time.NewTicker(max(window/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			now := l.clock()
			l.returnIdle(now.Add(-window), now.Add(-16*window))
		}
	}
}
