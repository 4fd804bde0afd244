package ratelimit

import (
	"math"
	"sync"
	"time"
)

// Prefetch: a replica takes a little more than a decision needs from a
// shared bucket in Redis (its allotment) and serves the next decisions on
// that bucket from it, without a round trip, until it runs out. The
// allotment is at most Options.Prefetch of the limit's refill rate (one
// second of a 600-per-minute limit is 10 requests) and at most a
// sixteenth of what the bucket holds after the decision, so a bucket
// close to empty is decided in Redis, exactly. Tokens in an allotment
// have left the shared bucket: the replicas together never admit more
// than the limit. What a replica holds and does not use is missing on the
// others until it goes back: when the allotment has been idle for
// Prefetch, on the replica's next round trip for the bucket, and at
// Close. Refunds of settled reservations go to the allotment, up to its
// size; the rest goes to Redis in the background. A charge beyond a
// reservation is a debt in the allotment, paid with the next round trip.

// allotment is this replica's share of one shared bucket. The nil
// allotment (nothing is prefetched for the bucket) holds nothing: it
// takes nothing, drains 0 and sees the level Redis answered.
type allotment struct {
	mu    sync.Mutex
	limit int
	// held is what this replica may still spend without asking Redis;
	// negative: charges not yet sent.
	held float64
	// shared is what Redis said the bucket held (without held), at read.
	shared float64
	read   time.Time
	// used is the last time held changed.
	used time.Time
}

// allotments are the allotments of one limiter, by Redis key.
type allotments struct {
	window time.Duration // Options.Prefetch; 0: none
	m      sync.Map      // string -> *allotment
}

// lease is the most Redis may add to this replica's allotment of a bucket
// of limit: window's worth of the refill rate, whole tokens.
func (a *allotments) lease(limit int) int {
	if a.window <= 0 {
		return 0
	}
	return int(float64(limit) * a.window.Seconds() / 60)
}

// get returns key's allotment, created empty for limit; nil when the
// limiter prefetches nothing for that limit.
func (a *allotments) get(key string, limit int) *allotment {
	if a.lease(limit) <= 0 {
		return nil
	}
	if v, ok := a.m.Load(key); ok {
		return v.(*allotment)
	}
	v, _ := a.m.LoadOrStore(key, &allotment{limit: limit})
	return v.(*allotment)
}

// take spends n of the allotment when it holds n and the limit is the
// one it was taken for, and answers the tokens left in total as this
// replica sees them (the shared bucket refilled to now, plus held).
func (al *allotment) take(limit, n int, now time.Time) (left float64, ok bool) {
	if al == nil {
		return 0, false
	}
	al.mu.Lock()
	defer al.mu.Unlock()
	if al.limit != limit || al.held < float64(n) {
		return 0, false
	}
	al.held -= float64(n)
	al.used = now
	return al.left(now), true
}

// left is the bucket's level as this replica sees it. The caller holds mu.
func (al *allotment) left(now time.Time) float64 {
	refill := max(0, now.Sub(al.read).Seconds()) * float64(al.limit) / 60
	return math.Min(float64(al.limit), al.shared+refill) + al.held
}

// drain empties the allotment for a round trip to Redis and answers what
// goes back to the bucket (negative: a debt). A changed limit starts a
// new allotment.
func (al *allotment) drain(limit int) float64 {
	if al == nil {
		return 0
	}
	al.mu.Lock()
	defer al.mu.Unlock()
	back := al.held
	al.held, al.limit = 0, limit
	return back
}

// refill records a round trip's answer: Redis now holds shared, and added
// lease to this replica's allotment. It answers the level as this replica
// sees it.
func (al *allotment) refill(shared, lease float64, now time.Time) float64 {
	if al == nil {
		return shared
	}
	al.mu.Lock()
	defer al.mu.Unlock()
	al.held += lease
	al.shared, al.read, al.used = shared, now, now
	return al.left(now)
}

// restore puts back what drain took out when the round trip failed.
func (al *allotment) restore(back float64) {
	if al == nil {
		return
	}
	al.mu.Lock()
	al.held += back
	al.mu.Unlock()
}

// credit adds delta (negative to charge) to the allotment and answers what
// exceeds its size, to send to Redis; 0 when it fits.
func (al *allotment) credit(delta float64, size int, now time.Time) (excess float64) {
	al.mu.Lock()
	defer al.mu.Unlock()
	al.held += delta
	al.used = now
	if over := al.held - float64(size); over > 0 {
		al.held = float64(size)
		return over
	}
	return 0
}

// idle takes out and answers what an allotment unused since before cutoff
// holds (to give back), and whether it did.
func (al *allotment) idle(cutoff time.Time) (float64, bool) {
	al.mu.Lock()
	defer al.mu.Unlock()
	if al.held == 0 || al.used.After(cutoff) {
		return 0, false
	}
	back := al.held
	al.held = 0
	return back, true
}

// forgettable reports whether the allotment is empty and unused since
// before cutoff.
func (al *allotment) forgettable(cutoff time.Time) bool {
	al.mu.Lock()
	defer al.mu.Unlock()
	return al.held == 0 && al.used.Before(cutoff)
}
