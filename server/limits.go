package server

import (
	"context"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/budget"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ratelimit"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redisconn"
)

// initLimits builds the rate limiter: in memory, or shared by every
// replica in Redis when redis.url is set. With PostgreSQL (several
// replicas) and no Redis it warns that limits and budgets are per replica.
func (s *Server) initLimits() error {
	o := ratelimit.Options{
		RequestsPerMinute:        s.cfg.Limits.RequestsPerMinute,
		TokensPerMinute:          s.cfg.Limits.TokensPerMinute,
		ControlRequestsPerMinute: s.cfg.Limits.ControlPlaneRequestsPerMinute,
		Prefetch:                 time.Duration(s.cfg.Redis.Prefetch),
	}
	if s.cfg.Redis.URL == "" {
		if s.cfg.Database.Postgres() {
			s.log.Warn("database.url is set but redis.url is not: rate limits and budgets are counted per replica, so N replicas admit up to N times each limit; set SWITCHBOARD_REDIS_URL to share them")
		}
		s.limiter = ratelimit.New(o)
		return nil
	}
	c, err := redisconn.Open(s.cfg.Redis)
	if err != nil {
		return err
	}
	s.redis = c
	s.redisFallback = redisconn.NewFallback(s.cfg.Redis, s.log)
	l := ratelimit.NewRedis(c, o, s.redisFallback)
	s.closers = append(s.closers, func(context.Context) error { l.Close(); return c.Close() })
	s.limiter = l
	return nil
}

// budgetLedger is where budgets count: Redis when it is configured, the
// tracker's memory otherwise (nil).
func (s *Server) budgetLedger() budget.Ledger {
	if s.redis == nil {
		return nil
	}
	return &budget.RedisLedger{Client: s.redis, Fallback: s.redisFallback}
}

// pingRedis checks the shared limits' Redis for /readyz; nil when none is
// configured.
func (s *Server) pingRedis(ctx context.Context) error {
	if s.redis == nil {
		return nil
	}
	ctx, cancel := s.redisFallback.Context(ctx)
	defer cancel()
	if err := s.redis.Ping(ctx).Err(); err != nil {
		return errs.Wrap(errs.Unavailable, err, "not ready: Redis (redis.url, shared rate limits and budgets) is not answering; check that it is up and reachable")
	}
	return nil
}

// Settled waits until the settlements of finished calls and what this
// replica took ahead (redis.prefetch) are back in the shared limiter,
// which applies them in the background (tests).
func (s *Server) Settled() {
	if l, ok := s.limiter.(*ratelimit.Redis); ok {
		l.Flush()
	}
}
