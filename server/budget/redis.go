package budget

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/redisconn"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

// RedisLedger keeps the running spend and the reservations in a Redis
// server shared by every replica, so that a budget of $1 spent through
// three replicas stops at $1, not $3.
//
// Each credential's period is a hash whose field spent is seeded once per
// period from the usage records (HSETNX: the first replica to read them
// wins) and then grows by each settled call's cost (HINCRBY, in units of
// usage.CostQuantum so that sums are exact); it expires a day after the
// period ends. The cost reserved by calls in flight is a separate counter
// whose expiry (ReservationTTL) is renewed by each admitted call, so that
// the reservations of a replica that died mid-call do not hold the budget
// for ever. Admitting and settling are one round trip each.
//
// While Redis does not answer, Fallback decides: fail open admits without
// a reservation, fail closed refuses with 503 unavailable. A settle that
// cannot reach Redis is lost for Redis (counted, logged); the usage
// records still hold it, and the next seed (after Redis lost its data)
// reads it from there.
type RedisLedger struct {
	Client   redis.Cmdable
	Fallback *redisconn.Fallback
	// ReservationTTL bounds how long a reservation outlives the last call
	// admitted for the period (15 minutes when zero).
	ReservationTTL time.Duration
}

var _ Ledger = (*RedisLedger)(nil)

// quanta is usd in units of usage.CostQuantum.
func quanta(usd float64) int64 { return int64(math.Round(usage.RoundUSD(usd) * 1e10)) }

func fromQuanta(q int64) float64 { return usage.RoundUSD(float64(q) / 1e10) }

func (l *RedisLedger) keys(per Period) []string {
	k := "switchboard:budget:{" + per.Credential + "}:" + per.Name + ":" + strconv.FormatInt(per.Start.Unix(), 10)
	return []string{k, k + ":reserved"}
}

// admitScript: {-1} when the period has no spend yet (seed it), {0,
// spent} when spent + reserved has reached ARGV[1], {1, spent} once
// ARGV[2] is reserved (ARGV[3]: the reservations' expiry in ms).
var admitScript = redis.NewScript(`
local spent = redis.call('HGET', KEYS[1], 'spent')
if not spent then return {-1, 0} end
spent = tonumber(spent)
local reserved = tonumber(redis.call('GET', KEYS[2]) or '0')
if spent + reserved >= tonumber(ARGV[1]) then return {0, spent} end
redis.call('INCRBY', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {1, spent}
`)

// settleScript releases ARGV[1] and adds ARGV[2] to the spend when the
// period is seeded; it answers the spend, or -1 when it is not.
var settleScript = redis.NewScript(`
if tonumber(ARGV[1]) > 0 and redis.call('DECRBY', KEYS[2], ARGV[1]) <= 0 then
  redis.call('DEL', KEYS[2])
end
if redis.call('HEXISTS', KEYS[1], 'spent') == 0 then return -1 end
return redis.call('HINCRBY', KEYS[1], 'spent', ARGV[2])
`)

func (l *RedisLedger) reservationTTL() time.Duration {
	if l.ReservationTTL > 0 {
		return l.ReservationTTL
	}
	return 15 * time.Minute
}

// seed writes the period's spend from the usage records unless another
// replica did first.
func (l *RedisLedger) seed(ctx context.Context, per Period, seed Seed) error {
	spent, err := seed(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := l.Fallback.Context(ctx)
	defer cancel()
	k := l.keys(per)
	_, err = l.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSetNX(ctx, k[0], "spent", quanta(spent))
		if !per.End.IsZero() {
			p.ExpireAt(ctx, k[0], per.End.Add(24*time.Hour))
		}
		return nil
	})
	return redisErr(err)
}

// redisErr marks a failure of Redis (as opposed to one of the usage
// records) so that the fallback decides.
type redisError struct{ error }

func (e redisError) Unwrap() error { return e.error }

func redisErr(err error) error {
	if err == nil {
		return nil
	}
	return redisError{err}
}

func (l *RedisLedger) Admit(ctx context.Context, per Period, budgetUSD, worstUSD float64, seed Seed) (Hold, error) {
	h, err := l.admit(ctx, per, budgetUSD, worstUSD, seed)
	if _, ok := err.(redisError); ok {
		if err := l.Fallback.Failed("budget", err); err != nil {
			return Hold{}, err
		}
		return Hold{Admitted: true}, nil
	}
	return h, err
}

func (l *RedisLedger) admit(ctx context.Context, per Period, budgetUSD, worstUSD float64, seed Seed) (Hold, error) {
	k := l.keys(per)
	for seeded := false; ; seeded = true {
		rctx, cancel := l.Fallback.Context(ctx)
		res, err := admitScript.Run(rctx, l.Client, k, quanta(budgetUSD), quanta(worstUSD), l.reservationTTL().Milliseconds()).Int64Slice()
		cancel()
		if err != nil {
			return Hold{}, redisErr(err)
		}
		switch {
		case res[0] == 1:
			return Hold{Admitted: true, Spent: fromQuanta(res[1]), Reserved: fromQuanta(quanta(worstUSD))}, nil
		case res[0] == 0:
			return Hold{Spent: fromQuanta(res[1])}, nil
		case seeded:
			// Seeded, then gone at once: Redis lost its data again.
			return Hold{}, redisErr(redis.Nil)
		}
		if err := l.seed(ctx, per, seed); err != nil {
			return Hold{}, err
		}
	}
}

func (l *RedisLedger) Settle(ctx context.Context, per Period, reservedUSD, costUSD float64) (float64, bool) {
	ctx, cancel := l.Fallback.Context(ctx)
	defer cancel()
	spent, err := settleScript.Run(ctx, l.Client, l.keys(per), quanta(reservedUSD), quanta(costUSD)).Int64()
	if err != nil {
		l.Fallback.Lost("budget", err)
		return 0, false
	}
	if spent < 0 {
		return 0, false
	}
	return fromQuanta(spent), true
}

// Spent reads the shared spend, seeding it when needed. While Redis does
// not answer it reports what the usage records hold.
func (l *RedisLedger) Spent(ctx context.Context, per Period, seed Seed) (float64, error) {
	k := l.keys(per)
	for range 2 {
		rctx, cancel := l.Fallback.Context(ctx)
		q, err := l.Client.HGet(rctx, k[0], "spent").Int64()
		cancel()
		if err == nil {
			return fromQuanta(q), nil
		}
		if err != redis.Nil {
			l.Fallback.Lost("budget", err)
			return seed(ctx)
		}
		if err := l.seed(ctx, per, seed); err != nil {
			if _, ok := err.(redisError); ok {
				l.Fallback.Lost("budget", err)
				return seed(ctx)
			}
			return 0, err
		}
	}
	return seed(ctx)
}
