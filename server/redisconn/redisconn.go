// Package redisconn connects Switchboard to the Redis server that shares
// rate limits and budgets across replicas (redis.url), and decides what a
// request gets while Redis does not answer (redis.failMode).
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/metrics"
)

// Open returns a client for cfg.URL whose every call is bounded by
// cfg.Timeout. It does not connect: the first command does, and a Redis
// that is down at start is retried on every command, so limits resume
// when it comes back. Errors never repeat the URL (it may hold a password).
func Open(cfg config.Redis) (*redis.Client, error) {
	o, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, errors.New("redis.url is not a valid Redis URL (redis://[:password@]host:6379/0, rediss:// for TLS)")
	}
	t := cfg.Timeout.D()
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = t, t, t
	o.ContextTimeoutEnabled = true
	// One retry covers a pooled connection that died with a Redis
	// restart; more would only stretch an outage past redis.timeout.
	o.MaxRetries = 1
	// A refused dial fails at once: a request must not wait through
	// dial retries while Redis is down.
	o.DialerRetries = 1
	return redis.NewClient(o), nil
}

// Fallback is what a request gets while Redis does not answer: fail open
// admits it (counted in switchboard_redis_unavailable_total, logged at
// most once per LogEvery), fail closed refuses it with 503 unavailable.
type Fallback struct {
	// Closed refuses requests while Redis does not answer.
	Closed bool
	// Timeout bounds each call (redis.timeout).
	Timeout time.Duration
	// Log receives the outage reports; slog.Default when nil.
	Log *slog.Logger
	// LogEvery is the least time between two reports (10 s when zero).
	LogEvery time.Duration

	lastLog    atomic.Int64 // unix ns of the last report
	suppressed atomic.Int64 // failures since the last report
}

// NewFallback returns the fallback cfg configures.
func NewFallback(cfg config.Redis, log *slog.Logger) *Fallback {
	return &Fallback{Closed: cfg.FailMode == config.FailClosed, Timeout: cfg.Timeout.D(), Log: log}
}

// Context bounds one Redis call by the timeout.
func (f *Fallback) Context(ctx context.Context) (context.Context, context.CancelFunc) {
	if f == nil || f.Timeout <= 0 {
		return context.WithTimeout(ctx, 250*time.Millisecond)
	}
	return context.WithTimeout(ctx, f.Timeout)
}

func (f *Fallback) mode() string {
	if f != nil && f.Closed {
		return config.FailClosed
	}
	return config.FailOpen
}

// Failed records that use (ratelimit, budget) could not reach Redis. It
// returns nil under fail open (admit) and errs.Unavailable under fail
// closed (refuse).
func (f *Fallback) Failed(use string, err error) error {
	mode := f.mode()
	metrics.RedisUnavailable(use, mode)
	f.report(use, mode, err)
	if mode == config.FailClosed {
		return errs.Wrap(errs.Unavailable, err, "the shared "+use+" store (Redis, redis.url) is not answering and redis.failMode is closed; retry the request, or check that Redis is up")
	}
	return nil
}

// Lost records a write that could not reach Redis after the request was
// admitted (a settle): counted and logged, never refused.
func (f *Fallback) Lost(use string, err error) {
	metrics.RedisUnavailable(use, f.mode())
	f.report(use, f.mode(), err)
}

// report logs the failure unless one was logged less than LogEvery ago;
// the next report says how many were not logged.
func (f *Fallback) report(use, mode string, err error) {
	if f == nil {
		return
	}
	every := f.LogEvery
	if every <= 0 {
		every = 10 * time.Second
	}
	now := time.Now().UnixNano()
	last := f.lastLog.Load()
	if now-last < int64(every) || !f.lastLog.CompareAndSwap(last, now) {
		f.suppressed.Add(1)
		return
	}
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	what := "requests are admitted without the shared limit (redis.failMode open)"
	if mode == config.FailClosed {
		what = "requests are refused with 503 (redis.failMode closed)"
	}
	log.Error(fmt.Sprintf("redis: not answering; %s until it is back", what),
		"use", use, "error", err.Error(), "notLoggedSinceLastReport", f.suppressed.Swap(0))
}
