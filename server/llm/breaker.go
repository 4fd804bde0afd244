package llm

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// Circuit breaker defaults (a provider's circuitBreaker config overrides them).
const (
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = 30 * time.Second
)

// BreakerState is the state of a provider's circuit breaker.
type BreakerState int32

// Breaker states.
const (
	// BreakerClosed lets every call through.
	BreakerClosed BreakerState = iota
	// BreakerOpen skips the provider until the cooldown has passed.
	BreakerOpen
	// BreakerHalfOpen lets one trial call through; its outcome closes or
	// reopens the breaker.
	BreakerHalfOpen
)

// String names the state as metrics and logs do.
func (s BreakerState) String() string {
	switch s {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return "closed"
}

// outcome is what a call says about its provider's health.
type outcome int

const (
	// outcomeAlive: the provider answered (success, 4xx, 429).
	outcomeAlive outcome = iota
	// outcomeDown: 5xx, connection error, timeout.
	outcomeDown
	// outcomeNeutral: the call says nothing (the caller went away).
	outcomeNeutral
)

// classify tells what err (nil on success) says about the provider: a
// fallback-worthy upstream failure other than a 429 means it is down.
func classify(err error) outcome {
	if err == nil {
		return outcomeAlive
	}
	var ce *CallError
	if !errors.As(err, &ce) {
		return outcomeNeutral
	}
	if ce.Fallback && ce.Err.Kind != errs.RateLimited {
		return outcomeDown
	}
	return outcomeAlive
}

// Transition is a change of a breaker that callers report: opened (the
// provider is down) or closed again (recovered).
type Transition struct {
	Provider string
	// Opened is true when the breaker opened, false when it closed.
	Opened bool
	// Failures is the number of consecutive failures that opened it.
	Failures int
	// LastErrorCode is the error code of the last of them.
	LastErrorCode string
	// RetryAt is when a trial call will be let through.
	RetryAt time.Time
	// DownFor is how long the breaker was open (on closing).
	DownFor time.Duration
}

// Breaker is one provider's circuit breaker. A closed breaker costs one
// atomic load per call and one per success.
type Breaker struct {
	provider  string
	threshold int
	cooldown  time.Duration

	state    atomic.Int32 // BreakerState
	failures atomic.Int32 // consecutive down failures while closed

	mu       sync.Mutex
	lastCode string
	openedAt time.Time
	retryAt  time.Time
	trial    bool // the half-open trial call is in flight
}

// NewBreaker returns a closed breaker for provider; threshold < 0 returns
// nil (no breaker), zero values take the defaults.
func NewBreaker(provider string, c config.CircuitBreaker) *Breaker {
	if c.Threshold < 0 {
		return nil
	}
	b := &Breaker{provider: provider, threshold: c.Threshold, cooldown: c.Cooldown.D()}
	if b.threshold == 0 {
		b.threshold = DefaultBreakerThreshold
	}
	if b.cooldown <= 0 {
		b.cooldown = DefaultBreakerCooldown
	}
	return b
}

// State returns the breaker's state (closed for a nil breaker).
func (b *Breaker) State() BreakerState {
	if b == nil {
		return BreakerClosed
	}
	return BreakerState(b.state.Load())
}

// Allow reports whether a call may go to the provider at now. When it may
// not, retryAt is when the next trial call will be let through. An open
// breaker whose cooldown has passed becomes half-open and lets this caller
// through as the trial; the others are refused until the trial ends.
func (b *Breaker) Allow(now time.Time) (ok bool, retryAt time.Time) {
	if b == nil || BreakerState(b.state.Load()) == BreakerClosed {
		return true, time.Time{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch BreakerState(b.state.Load()) {
	case BreakerClosed:
		return true, time.Time{}
	case BreakerOpen:
		if now.Before(b.retryAt) {
			return false, b.retryAt
		}
		b.setState(BreakerHalfOpen)
		b.trial = true
		return true, time.Time{}
	default: // half-open
		if b.trial {
			return false, b.retryAt
		}
		b.trial = true
		return true, time.Time{}
	}
}

// Record reports the outcome of a call let through by Allow (err nil on
// success) and returns the transition it caused, if any.
func (b *Breaker) Record(now time.Time, err error) (Transition, bool) {
	if b == nil {
		return Transition{}, false
	}
	if err == nil && BreakerState(b.state.Load()) == BreakerClosed && b.failures.Load() == 0 {
		return Transition{}, false // the hot path: a healthy provider
	}
	o := classify(err)
	b.mu.Lock()
	defer b.mu.Unlock()
	state := BreakerState(b.state.Load())
	switch o {
	case outcomeAlive:
		b.failures.Store(0)
		if state == BreakerClosed {
			return Transition{}, false
		}
		b.trial = false
		b.setState(BreakerClosed)
		return Transition{Provider: b.provider, DownFor: now.Sub(b.openedAt)}, true
	case outcomeDown:
		b.lastCode = string(errs.KindOf(err))
		switch state {
		case BreakerClosed:
			n := b.failures.Add(1)
			if int(n) < b.threshold {
				return Transition{}, false
			}
			b.openedAt, b.retryAt = now, now.Add(b.cooldown)
			b.setState(BreakerOpen)
			return Transition{Provider: b.provider, Opened: true, Failures: int(n), LastErrorCode: b.lastCode, RetryAt: b.retryAt}, true
		case BreakerHalfOpen:
			// The trial failed: open again for another cooldown, without
			// a new event (the provider was never reported recovered).
			b.trial = false
			b.retryAt = now.Add(b.cooldown)
			b.setState(BreakerOpen)
		}
		return Transition{}, false
	default:
		if state == BreakerHalfOpen {
			b.trial = false // let another caller try
		}
		return Transition{}, false
	}
}

// setState stores s and mirrors it in the metrics; the caller holds b.mu.
func (b *Breaker) setState(s BreakerState) {
	if s == BreakerClosed {
		b.failures.Store(0)
	}
	b.state.Store(int32(s))
	observeBreaker(b.provider, s)
}

// Breakers holds the circuit breaker of every configured provider.
type Breakers struct {
	m   map[string]*Breaker
	now atomic.Pointer[func() time.Time]
}

// NewBreakers returns a breaker per provider of providers (the built-in
// local provider has none: it cannot be down).
func NewBreakers(providers []config.Provider) *Breakers {
	bs := &Breakers{m: map[string]*Breaker{}}
	for _, p := range providers {
		if p.Type == TypeLocal {
			continue
		}
		if b := NewBreaker(p.Name, p.CircuitBreaker); b != nil {
			bs.m[p.Name] = b
			observeBreaker(p.Name, BreakerClosed)
		}
	}
	return bs
}

// For returns provider's breaker; nil (always closed) when it has none.
func (bs *Breakers) For(provider string) *Breaker {
	if bs == nil {
		return nil
	}
	return bs.m[provider]
}

// SetClock replaces the breakers' clock (tests); nil restores time.Now.
func (bs *Breakers) SetClock(now func() time.Time) {
	if now == nil {
		bs.now.Store(nil)
		return
	}
	bs.now.Store(&now)
}

// Now is the breakers' clock.
func (bs *Breakers) Now() time.Time {
	if bs != nil {
		if f := bs.now.Load(); f != nil {
			return (*f)()
		}
	}
	return time.Now()
}
