package server

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
)

// rateLimitOnceFor is how long the store remembers that a credential's
// ratelimit.exceeded of a minute was recorded (replicas whose clocks
// differ by less still agree on it).
const rateLimitOnceFor = 5 * time.Minute

// rateLimitEvents emits ratelimit.exceeded when a credential is refused
// 429 rate_limited, at most once per credential and minute: an in-memory
// set of the credentials already reported this minute keeps the request
// path from queueing more, and the queue's Once key keeps replicas from
// recording the same minute twice.
type rateLimitEvents struct {
	queue *events.Queue
	now   func() time.Time

	mu     sync.Mutex
	minute int64
	seen   map[string]struct{}
}

// rateLimitExceededData is the payload of ratelimit.exceeded.
type rateLimitExceededData struct {
	Key               string `json:"key"`
	KeyKind           string `json:"keyKind"`
	Limit             string `json:"limit"`
	Plane             string `json:"plane"`
	LimitPerMinute    int    `json:"limitPerMinute"`
	RetryAfterSeconds int64  `json:"retryAfterSeconds"`
}

// refused reports err, the 429 that refused p (errs.RateLimited, as the
// limiter builds it); any other error is ignored.
func (r *rateLimitEvents) refused(p *auth.Principal, err error) {
	var e *errs.Error
	if r == nil || p == nil || !errors.As(err, &e) || e.Kind != errs.RateLimited {
		return
	}
	now := time.Now()
	if r.now != nil {
		now = r.now()
	}
	minute := now.Unix() / 60
	id := p.Kind + ":" + p.ID
	r.mu.Lock()
	if minute != r.minute || r.seen == nil {
		r.minute, r.seen = minute, map[string]struct{}{}
	}
	_, dup := r.seen[id]
	r.seen[id] = struct{}{}
	r.mu.Unlock()
	if dup {
		return
	}
	d := rateLimitExceededData{Key: p.ID, KeyKind: p.Kind, RetryAfterSeconds: int64(e.RetryAfter / time.Second)}
	d.Limit, _ = e.Details["limit"].(string)
	d.Plane, _ = e.Details["plane"].(string)
	d.LimitPerMinute, _ = e.Details["limitPerMinute"].(int)
	r.queue.Emit(events.Pending{
		Type:      events.RateLimitExceeded,
		Data:      d,
		Once:      events.RateLimitExceeded + "/" + id + "/" + strconv.FormatInt(minute, 10),
		OnceUntil: time.Unix((minute+1)*60, 0).Add(rateLimitOnceFor),
	})
}
