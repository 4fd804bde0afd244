// Package ratelimit limits what each credential may spend per minute:
// requests on every authenticated route, and model tokens on the LLM routes.
//
// Requests are counted per plane. The data plane (the routes that spend
// models and upstreams: generation, chat, embeddings, function calling, the
// OpenAI-compatible API, running actions) has the per-credential
// requests-per-minute limit, which an API key's or OAuth client's
// rateLimit overrides. The control plane (defining connectors, actions,
// connections, webhooks, keys and clients) has its own, higher limit, the
// same for every credential, so that an operator applying hundreds of
// Terraform resources neither runs into the budget that protects the
// models nor spends it. Which plane a route belongs to is declared in the
// OpenAPI spec (x-switchboard-plane).
//
// Each (credential, dimension) pair has a token bucket holding at most one
// minute's allowance and refilled continuously at limit/60 per second, so a
// credential may burst up to its whole per-minute limit and then proceeds at
// the steady rate. Requests take 1 from the request bucket. LLM calls
// Reserve their worst case (prompt estimate + maxTokens) before calling the
// provider and Settle with the actual usage afterwards: unused tokens flow
// back, usage beyond the reservation is charged too (the bucket may go
// negative, delaying the next calls), so the budget has no holes. A
// reservation larger than a whole minute's allowance is admitted only when
// the bucket is full.
//
// Two implementations sit behind the Limiter interface: Memory keeps the
// buckets in this process (one replica), Redis keeps them in a Redis
// server shared by every replica (redis.go), with the same semantics and
// headers, each replica spending a small prefetched allotment of each
// bucket without a round trip (prefetch.go).
//
// Memory's buckets live in 64 shards, each behind its own mutex, so
// concurrent credentials rarely contend. A bucket that has refilled
// completely is indistinguishable from a new one and is dropped by a
// periodic sweep; a hard cap per shard bounds memory even under a flood of
// distinct credentials.
package ratelimit

import (
	"context"
	"hash/maphash"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/metrics"
)

// Header names. RateLimit-* describe the requests-per-minute limit on every
// limited response (IETF draft-ietf-httpapi-ratelimit-headers); the
// X-RateLimit-*-Tokens headers (as OpenAI names them) describe the
// tokens-per-minute limit on LLM responses.
const (
	HeaderLimit           = "RateLimit-Limit"
	HeaderRemaining       = "RateLimit-Remaining"
	HeaderReset           = "RateLimit-Reset"
	HeaderPolicy          = "RateLimit-Policy"
	HeaderLimitTokens     = "X-RateLimit-Limit-Tokens"
	HeaderRemainingTokens = "X-RateLimit-Remaining-Tokens"
	HeaderResetTokens     = "X-RateLimit-Reset-Tokens"
)

// Canonical forms, assigned without re-canonicalising on every response.
var (
	hLimit           = http.CanonicalHeaderKey(HeaderLimit)
	hRemaining       = http.CanonicalHeaderKey(HeaderRemaining)
	hReset           = http.CanonicalHeaderKey(HeaderReset)
	hPolicy          = http.CanonicalHeaderKey(HeaderPolicy)
	hLimitTokens     = http.CanonicalHeaderKey(HeaderLimitTokens)
	hRemainingTokens = http.CanonicalHeaderKey(HeaderRemainingTokens)
	hResetTokens     = http.CanonicalHeaderKey(HeaderResetTokens)
)

// Dimension is what a bucket counts.
type Dimension uint8

// The limited dimensions.
const (
	// Requests are data-plane requests.
	Requests Dimension = iota
	// Tokens are model tokens (data plane).
	Tokens
	// ControlRequests are control-plane requests.
	ControlRequests
)

// String names the dimension as in metrics.
func (d Dimension) String() string {
	switch d {
	case Tokens:
		return "tokens"
	case ControlRequests:
		return "control_requests"
	}
	return "requests"
}

// Plane is the family of routes a request belongs to.
type Plane uint8

// The two planes.
const (
	// DataPlane routes spend models and upstreams.
	DataPlane Plane = iota
	// ControlPlane routes define and inspect Switchboard's own resources.
	ControlPlane
)

// ParsePlane reads a plane as the OpenAPI spec names it ("data" or
// "control").
func ParsePlane(s string) (Plane, bool) {
	switch s {
	case "data":
		return DataPlane, true
	case "control":
		return ControlPlane, true
	}
	return 0, false
}

// String names the plane as the OpenAPI spec does.
func (p Plane) String() string {
	if p == ControlPlane {
		return "control"
	}
	return "data"
}

const (
	nShards = 64
	// DefaultMaxBuckets bounds the number of live buckets.
	DefaultMaxBuckets = 1 << 18
	sweepEvery        = int64(time.Minute)
)

// Options configure a limiter (Memory or Redis).
type Options struct {
	// RequestsPerMinute and TokensPerMinute are the data-plane defaults
	// per credential; zero or negative turns that limit off.
	RequestsPerMinute int
	TokensPerMinute   int
	// ControlRequestsPerMinute is every credential's control-plane limit;
	// zero or negative turns it off. Per-credential overrides do not
	// change it.
	ControlRequestsPerMinute int
	// MaxBuckets bounds memory (DefaultMaxBuckets when zero).
	MaxBuckets int
	// Prefetch (Redis only) is how much of each shared limit a replica
	// may take ahead and spend without a round trip, as a duration of the
	// limit's refill rate (see prefetch.go); 0 sends every decision to
	// Redis.
	Prefetch time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Limiter is what the server needs of a rate limiter: the middleware
// counts requests, the LLM admission reserves and settles tokens. Memory
// and Redis implement it.
type Limiter interface {
	// Limits returns the data-plane per-minute limits that apply to p
	// (0 = unlimited).
	Limits(p *auth.Principal) (requestsPerMinute, tokensPerMinute int)
	// AllowRequest counts one request of p against its requests-per-minute
	// limit on plane. The error is errs.Unavailable when the shared
	// limiter cannot decide and fails closed.
	AllowRequest(ctx context.Context, p *auth.Principal, plane Plane) (Result, error)
	// Reserve takes n tokens from p's tokens-per-minute bucket before an
	// LLM call, or refuses with errs.RateLimited; nil when no limit
	// applies.
	Reserve(ctx context.Context, p *auth.Principal, n int) (*Reservation, error)
	// AdmitCall is AllowRequest then Reserve for a model call, in one
	// decision (one round trip to a shared limiter). Both results' headers
	// are written to the response headers carried by ctx. A refused
	// request answers Allowed false and no Reservation (refuse with
	// Result.Err()); a refused reservation is Reserve's error.
	AdmitCall(ctx context.Context, p *auth.Principal, plane Plane, n int) (Result, *Reservation, error)
}

var (
	_ Limiter = (*Memory)(nil)
	_ Limiter = (*Redis)(nil)
)

// policy is what both limiters share: the default limits and how a
// principal's override and a plane pick a bucket.
type policy struct {
	rpm, tpm int
	crpm     int
}

// Limits returns the data-plane per-minute limits that apply to p
// (0 = unlimited).
func (l policy) Limits(p *auth.Principal) (requestsPerMinute, tokensPerMinute int) {
	rpm, tpm := l.rpm, l.tpm
	if p != nil && p.RateLimit != nil {
		if p.RateLimit.RequestsPerMinute > 0 {
			rpm = p.RateLimit.RequestsPerMinute
		}
		if p.RateLimit.TokensPerMinute > 0 {
			tpm = p.RateLimit.TokensPerMinute
		}
	}
	return rpm, tpm
}

// requestBucket is the bucket and limit of one request of p on plane;
// limit 0 when none applies.
func (l policy) requestBucket(p *auth.Principal, plane Plane) (bucketKey, int) {
	if p == nil {
		return bucketKey{}, 0
	}
	dim, rpm := Requests, l.crpm
	if plane == ControlPlane {
		dim = ControlRequests
	} else {
		rpm, _ = l.Limits(p)
	}
	return bucketKey{dim, p.Kind, p.ID}, rpm
}

// tokenBucket is p's tokens-per-minute bucket and limit; limit 0 when none
// applies.
func (l policy) tokenBucket(p *auth.Principal) (bucketKey, int) {
	if p == nil {
		return bucketKey{}, 0
	}
	_, tpm := l.Limits(p)
	return bucketKey{Tokens, p.Kind, p.ID}, tpm
}

// adjuster settles reservations: adds delta (negative to charge) to a
// bucket, capped at its limit.
type adjuster interface {
	adjust(k bucketKey, limit int, delta float64)
}

// Memory holds the buckets of every credential in this process.
type Memory struct {
	policy
	now         func() time.Time
	epoch       time.Time
	maxPerShard int
	seed        maphash.Seed
	shards      [nShards]shard
}

type shard struct {
	mu        sync.Mutex
	m         map[bucketKey]bucket
	lastSweep int64
	_         [40]byte // keep shards on separate cache lines
}

type bucketKey struct {
	dim  Dimension
	kind string
	id   string
}

type bucket struct {
	tokens float64 // may be negative after a settle beyond the reservation
	last   int64   // ns since epoch at which tokens was computed
	limit  int     // per minute
}

// New returns an in-memory limiter with the given defaults.
func New(o Options) *Memory {
	if o.MaxBuckets <= 0 {
		o.MaxBuckets = DefaultMaxBuckets
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Memory{
		policy: policy{rpm: o.RequestsPerMinute, tpm: o.TokensPerMinute, crpm: o.ControlRequestsPerMinute},
		now:    o.Now, epoch: o.Now(),
		maxPerShard: max(1, o.MaxBuckets/nShards),
		seed:        maphash.MakeSeed(),
	}
	for i := range l.shards {
		l.shards[i].m = map[bucketKey]bucket{}
	}
	return l
}

// Result is the state of one bucket after a decision.
type Result struct {
	// Dimension is what was counted.
	Dimension Dimension
	// Allowed is false when the request must be refused.
	Allowed bool
	// Limit is the per-minute limit; 0 when unlimited (no headers then).
	Limit int
	// Remaining is what may still be spent right now.
	Remaining int
	// Reset is the time until the bucket is full again.
	Reset time.Duration
	// RetryAfter is, on a refusal, the time until the request would pass.
	RetryAfter time.Duration
}

// SetHeaders writes the result's rate-limit headers into h.
func (r Result) SetHeaders(h http.Header) {
	if r.Limit <= 0 {
		return
	}
	// One backing array for the values: one allocation, not four.
	vs := make([]string, 4)
	vs[0] = strconv.Itoa(r.Limit)
	vs[1] = strconv.Itoa(r.Remaining)
	vs[2] = strconv.FormatInt(ceilSeconds(r.Reset), 10)
	limit, remaining, reset := hLimit, hRemaining, hReset
	if r.Dimension == Tokens {
		limit, remaining, reset = hLimitTokens, hRemainingTokens, hResetTokens
	} else {
		vs[3] = vs[0] + ";w=60"
		h[hPolicy] = vs[3:4:4]
	}
	h[limit] = vs[0:1:1]
	h[remaining] = vs[1:2:2]
	h[reset] = vs[2:3:3]
}

// Err is the 429 for a refused result: code rate_limited, Retry-After set.
func (r Result) Err() *errs.Error {
	secs := max(1, ceilSeconds(r.RetryAfter))
	var e *errs.Error
	name, plane := "requestsPerMinute", DataPlane
	switch r.Dimension {
	case Tokens:
		e = errs.E(errs.RateLimited, "rate limit exceeded: this credential may use %d model tokens per minute and has %d left; retry in %d s", r.Limit, r.Remaining, secs)
		name = "tokensPerMinute"
	case ControlRequests:
		e = errs.E(errs.RateLimited, "rate limit exceeded: this credential may send %d control-plane requests per minute (limits.controlPlaneRequestsPerMinute); retry in %d s", r.Limit, secs)
		name, plane = "controlPlaneRequestsPerMinute", ControlPlane
	default:
		e = errs.E(errs.RateLimited, "rate limit exceeded: this credential may send %d requests per minute; retry in %d s", r.Limit, secs)
	}
	e.RetryAfter = time.Duration(secs) * time.Second
	return e.WithDetails(map[string]any{"limit": name, "plane": plane.String(), "limitPerMinute": r.Limit, "remaining": r.Remaining, "retryAfterSeconds": secs})
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

// AllowRequest counts one request of p against its requests-per-minute
// limit on plane: the data plane's is p's (its override or the default),
// the control plane's is the same for every credential. Each plane has its
// own bucket. An unlimited or anonymous caller is always allowed (Limit 0).
// The in-memory limiter never fails.
func (l *Memory) AllowRequest(_ context.Context, p *auth.Principal, plane Plane) (Result, error) {
	k, rpm := l.requestBucket(p, plane)
	if rpm <= 0 {
		return Result{Allowed: true}, nil
	}
	r := l.take(k, rpm, 1, l.nanos())
	if !r.Allowed {
		metrics.RateLimited(k.dim.String(), p.Kind)
	}
	return r, nil
}

// Reservation is a tokens-per-minute reservation to settle once the actual
// usage is known. The nil Reservation (no limit applies) is valid.
type Reservation struct {
	l      adjuster
	key    bucketKey
	limit  int
	n      int
	mu     sync.Mutex
	closed bool
}

// AdmitCall implements Limiter: AllowRequest, then Reserve.
func (l *Memory) AdmitCall(ctx context.Context, p *auth.Principal, plane Plane, n int) (Result, *Reservation, error) {
	req, err := l.AllowRequest(ctx, p, plane)
	if err != nil {
		return req, nil, err
	}
	if h := headerFrom(ctx); h != nil {
		req.SetHeaders(h)
	}
	if !req.Allowed {
		return req, nil, nil
	}
	res, err := l.Reserve(ctx, p, n)
	return req, res, err
}

// Reserve takes n tokens from p's tokens-per-minute bucket before an LLM
// call, or refuses with a 429 (errs.RateLimited, Retry-After set) when the
// bucket holds fewer than min(n, limit). n is the call's worst case: its
// prompt estimate plus maxTokens. The token headers are written to the
// response headers carried by ctx (see WithHeader). It returns a nil
// Reservation when no limit applies.
func (l *Memory) Reserve(ctx context.Context, p *auth.Principal, n int) (*Reservation, error) {
	if l == nil {
		return nil, nil
	}
	k, tpm := l.tokenBucket(p)
	if tpm <= 0 {
		return nil, nil
	}
	n = max(n, 1)
	return reserved(ctx, l, k, tpm, n, l.take(k, tpm, n, l.nanos()))
}

// reserved turns the result of taking n tokens into a reservation, or the
// 429 that refuses it, writing the token headers either way.
func reserved(ctx context.Context, a adjuster, k bucketKey, limit, n int, r Result) (*Reservation, error) {
	if h := headerFrom(ctx); h != nil {
		r.SetHeaders(h)
	}
	if !r.Allowed {
		metrics.RateLimited(Tokens.String(), k.kind)
		return nil, r.Err()
	}
	return &Reservation{l: a, key: k, limit: limit, n: n}, nil
}

// Settle replaces the reservation by the actual number of tokens used:
// the difference is refunded, or charged when actual exceeds it. Only the
// first call counts; calling it on a nil Reservation does nothing. A call
// that failed before using tokens settles with 0.
func (r *Reservation) Settle(actual int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	r.l.adjust(r.key, r.limit, float64(r.n-max(actual, 0)))
}

// Reserved is the number of tokens the reservation holds.
func (r *Reservation) Reserved() int {
	if r == nil {
		return 0
	}
	return r.n
}

func (l *Memory) nanos() int64 { return int64(l.now().Sub(l.epoch)) }

func (l *Memory) shard(k bucketKey) *shard {
	return &l.shards[maphash.String(l.seed, k.id)%nShards]
}

// take removes n from the bucket when it holds at least min(n, limit).
func (l *Memory) take(k bucketKey, limit, n int, now int64) Result {
	s := l.shard(k)
	s.mu.Lock()
	b := s.get(k, limit, now, l.maxPerShard)
	need := float64(min(n, limit))
	res := Result{Dimension: k.dim, Limit: limit}
	if b.tokens >= need {
		b.tokens -= float64(n)
		res.Allowed = true
	} else {
		res.RetryAfter = nanos((need - b.tokens) / b.rate())
	}
	s.m[k] = b
	s.mu.Unlock()
	res.Remaining = int(math.Max(0, math.Floor(b.tokens)))
	res.Reset = nanos((float64(limit) - b.tokens) / b.rate())
	return res
}

// nanos rounds a float number of nanoseconds to a Duration, absorbing the
// float error of the rate division (1/60e-9 is not exactly 1e9).
func nanos(f float64) time.Duration {
	return time.Duration(math.Round(f/1e3)) * time.Microsecond
}

// adjust adds delta (negative to charge) to a bucket, capped at its limit.
func (l *Memory) adjust(k bucketKey, limit int, delta float64) {
	s := l.shard(k)
	s.mu.Lock()
	b := s.get(k, limit, l.nanos(), l.maxPerShard)
	b.tokens = math.Min(float64(b.limit), b.tokens+delta)
	s.m[k] = b
	s.mu.Unlock()
}

// rate is the refill rate in tokens per nanosecond.
func (b bucket) rate() float64 { return float64(b.limit) / float64(time.Minute) }

// get returns k's bucket refilled to now (a full new one when absent).
// The caller holds s.mu.
func (s *shard) get(k bucketKey, limit int, now int64, maxLen int) bucket {
	if now-s.lastSweep > sweepEvery {
		s.sweep(now, maxLen)
	}
	b, ok := s.m[k]
	if !ok {
		if len(s.m) >= maxLen {
			s.sweep(now, maxLen)
		}
		return bucket{tokens: float64(limit), last: now, limit: limit}
	}
	if b.limit != limit { // the override changed: keep the level, cap it
		b.limit = limit
		b.tokens = math.Min(b.tokens, float64(limit))
	}
	if el := now - b.last; el > 0 {
		b.tokens = math.Min(float64(limit), b.tokens+float64(el)*b.rate())
		b.last = now
	}
	return b
}

// sweep drops buckets that have refilled completely (a new bucket would be
// identical). When the shard is still at its cap, it drops arbitrary
// buckets down to three quarters of it: under a flood of distinct
// credentials memory stays bounded, at the price of a fresh allowance for
// the evicted ones.
func (s *shard) sweep(now int64, maxLen int) {
	s.lastSweep = now
	for k, b := range s.m {
		if b.tokens+float64(now-b.last)*b.rate() >= float64(b.limit) {
			delete(s.m, k)
		}
	}
	if len(s.m) < maxLen {
		return
	}
	for k := range s.m {
		if len(s.m) < maxLen*3/4 {
			break
		}
		delete(s.m, k)
	}
}

// Len returns the number of live buckets (tests, diagnostics).
func (l *Memory) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

type headerKey struct{}

// WithHeader returns ctx carrying the response headers, so that Reserve
// can add the token headers to the response of the request it limits.
func WithHeader(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, headerKey{}, h)
}

func headerFrom(ctx context.Context) http.Header {
	h, _ := ctx.Value(headerKey{}).(http.Header)
	return h
}
