package llm

import (
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

var (
	errDown    = &CallError{Err: errs.E(errs.Upstream, "provider failed (HTTP 500)"), Fallback: true}
	errSlow    = &CallError{Err: errs.E(errs.UpstreamTimeout, "provider did not answer"), Fallback: true}
	errLimited = &CallError{Err: errs.E(errs.RateLimited, "provider is rate limiting"), Fallback: true}
	errRefused = &CallError{Err: errs.E(errs.Invalid, "provider refused the request")}
)

// step is one call against the breaker at t seconds: whether Allow lets it
// through, then (when it does) its outcome and the transition expected.
type step struct {
	at      int // seconds since the start
	allowed bool
	err     error
	opened  bool         // the call's outcome opens the breaker
	closed  bool         // the call's outcome closes it
	state   BreakerState // after the step
}

func TestBreaker(t *testing.T) {
	down := func(at int, state BreakerState) step { return step{at: at, allowed: true, err: errDown, state: state} }
	ok := func(at int, state BreakerState) step { return step{at: at, allowed: true, state: state} }
	tests := []struct {
		name  string
		steps []step
	}{
		{"opens after the threshold of consecutive 5xx", []step{
			down(0, BreakerClosed), down(0, BreakerClosed),
			{at: 0, allowed: true, err: errDown, opened: true, state: BreakerOpen},
			{at: 1, allowed: false, state: BreakerOpen},
		}},
		{"timeouts count as down", []step{
			{at: 0, allowed: true, err: errSlow, state: BreakerClosed},
			{at: 0, allowed: true, err: errSlow},
			{at: 0, allowed: true, err: errSlow, opened: true, state: BreakerOpen},
		}},
		{"a success resets the count", []step{
			down(0, BreakerClosed), down(0, BreakerClosed), ok(0, BreakerClosed),
			down(0, BreakerClosed), down(0, BreakerClosed), ok(0, BreakerClosed),
		}},
		{"429 and 4xx do not count and show the provider alive", []step{
			down(0, BreakerClosed), down(0, BreakerClosed),
			{at: 0, allowed: true, err: errLimited, state: BreakerClosed},
			down(0, BreakerClosed), down(0, BreakerClosed),
			{at: 0, allowed: true, err: errRefused, state: BreakerClosed},
			down(0, BreakerClosed),
		}},
		{"the caller going away counts for nothing", []step{
			down(0, BreakerClosed), down(0, BreakerClosed),
			{at: 0, allowed: true, err: ErrClientGone, state: BreakerClosed},
			{at: 0, allowed: true, err: errDown, opened: true, state: BreakerOpen},
		}},
		{"after the cooldown one trial goes through and its success closes", []step{
			down(0, BreakerClosed), down(0, BreakerClosed), {at: 0, allowed: true, err: errDown, opened: true, state: BreakerOpen},
			{at: 29, allowed: false, state: BreakerOpen},
			{at: 30, allowed: true, closed: true, state: BreakerClosed},
			ok(31, BreakerClosed),
		}},
		{"a failed trial opens again for another cooldown without a new transition", []step{
			down(0, BreakerClosed), down(0, BreakerClosed), {at: 0, allowed: true, err: errDown, opened: true, state: BreakerOpen},
			{at: 30, allowed: true, err: errDown, state: BreakerOpen},
			{at: 59, allowed: false, state: BreakerOpen},
			{at: 60, allowed: true, closed: true, state: BreakerClosed},
		}},
		{"a trial cut by its caller lets the next caller try", []step{
			down(0, BreakerClosed), down(0, BreakerClosed), {at: 0, allowed: true, err: errDown, opened: true, state: BreakerOpen},
			{at: 30, allowed: true, err: ErrClientGone, state: BreakerHalfOpen},
			{at: 30, allowed: true, closed: true, state: BreakerClosed},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBreaker("up", config.CircuitBreaker{Threshold: 3, Cooldown: config.Duration(30 * time.Second)})
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, s := range tc.steps {
				now := t0.Add(time.Duration(s.at) * time.Second)
				allowed, retryAt := b.Allow(now)
				if allowed != s.allowed {
					t.Fatalf("step %d: Allow = %v, want %v", i, allowed, s.allowed)
				}
				if !allowed {
					if !retryAt.After(now) {
						t.Errorf("step %d: refused with retryAt %s, not after %s", i, retryAt, now)
					}
				} else {
					tr, changed := b.Record(now, s.err)
					if changed != (s.opened || s.closed) || (changed && tr.Opened != s.opened) {
						t.Fatalf("step %d: transition %+v (%v), want opened=%v closed=%v", i, tr, changed, s.opened, s.closed)
					}
					if s.opened && (tr.Failures != 3 || tr.LastErrorCode == "" || !tr.RetryAt.Equal(now.Add(30*time.Second))) {
						t.Errorf("step %d: opening transition %+v", i, tr)
					}
					if s.closed && tr.DownFor <= 0 {
						t.Errorf("step %d: closing transition %+v has no downFor", i, tr)
					}
				}
				if got := b.State(); got != s.state {
					t.Fatalf("step %d: state %s, want %s", i, got, s.state)
				}
			}
		})
	}
}

func TestBreaker_HalfOpenAdmitsOneTrialAtATime(t *testing.T) {
	b := NewBreaker("up", config.CircuitBreaker{Threshold: 1, Cooldown: config.Duration(time.Second)})
	t0 := time.Unix(0, 0)
	b.Allow(t0)
	b.Record(t0, errDown)
	now := t0.Add(time.Second)
	if ok, _ := b.Allow(now); !ok {
		t.Fatal("the trial after the cooldown was refused")
	}
	if ok, _ := b.Allow(now); ok {
		t.Fatal("a second call went through while the trial is in flight")
	}
}

func TestBreaker_Defaults(t *testing.T) {
	b := NewBreaker("up", config.CircuitBreaker{})
	if b.threshold != DefaultBreakerThreshold || b.cooldown != DefaultBreakerCooldown {
		t.Errorf("defaults = %d, %s", b.threshold, b.cooldown)
	}
	if NewBreaker("up", config.CircuitBreaker{Threshold: -1}) != nil {
		t.Error("a negative threshold should turn the breaker off")
	}
	var off *Breaker
	if ok, _ := off.Allow(time.Now()); !ok || off.State() != BreakerClosed {
		t.Error("a nil breaker must let every call through")
	}
}
