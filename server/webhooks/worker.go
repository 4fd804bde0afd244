package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// A lane records the outcomes of its attempts in one transaction per batch
// (so a burst costs one disk sync per batch, not per delivery). A batch
// ends after batchSize deliveries or batchTime, whichever comes first, so
// that a crash loses little: the outcomes not yet recorded are delivered
// again after a restart (at least once, same webhook-id).
const (
	batchSize = 64
	batchTime = 100 * time.Millisecond
)

// hardStopGrace bounds the wait for lanes once Close's deadline has passed
// and in-flight attempts were cancelled.
const hardStopGrace = 5 * time.Second

// maxErrorLength bounds Delivery.LastError.
const maxErrorLength = 512

// userAgent identifies deliveries.
const userAgent = "Switchboard-Webhooks/1"

func jitter() float64 { return rand.Float64() }

// worker delivers pending deliveries: one lane (goroutine) per webhook
// with work, at most cfg.Concurrency attempts in flight overall.
type worker struct {
	s   *Service
	sem chan struct{}
	// stop is closed by Close: no new attempt starts.
	stop chan struct{}
	// ctx parents attempts and store calls; cancelled when Close gives up
	// waiting for in-flight attempts.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	lanes   map[string]*lane
	started bool
	closed  bool
	wg      sync.WaitGroup
}

// lane is the delivery loop of one webhook.
type lane struct {
	kicked bool          // work may have arrived since the lane last looked
	wake   chan struct{} // interrupts the lane's wait
}

func newWorker(s *Service) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	return &worker{
		s: s, sem: make(chan struct{}, s.cfg.Concurrency), stop: make(chan struct{}), ctx: ctx, cancel: cancel,
		lanes: map[string]*lane{},
	}
}

// Start resumes the deliveries left pending in the store and starts the
// housekeeping loop (retention, expired rotated-out secrets, a periodic
// re-scan of the outbox). Events recorded before Start are delivered
// once it runs.
func (s *Service) Start() {
	w := s.worker
	w.mu.Lock()
	if w.started || w.closed {
		w.mu.Unlock()
		return
	}
	w.started = true
	w.wg.Add(1)
	w.mu.Unlock()
	go w.housekeeping()
}

// Close stops the worker: no new attempt starts; in-flight attempts may
// finish until ctx ends, then they are cancelled (their deliveries stay
// pending and are delivered again after a restart, or by another
// replica). The outcomes of finished attempts are recorded and the
// worker's leases released before Close returns.
func (s *Service) Close(ctx context.Context) error {
	w := s.worker
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.stop)
	w.mu.Unlock()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	defer w.cancel()
	// The lanes release their leases as they stop; the pruning job's is
	// released here, so that another replica takes both over at once.
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hardStopGrace)
		defer cancel()
		if err := s.leases.Release(rctx, pruneLease); err != nil {
			s.log.Warn("webhooks: releasing the pruning lease failed; it expires on its own", "error", err)
		}
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	w.cancel()
	select {
	case <-done:
		return nil
	case <-time.After(hardStopGrace):
		return fmt.Errorf("webhooks: delivery worker did not stop in time: %w", ctx.Err())
	}
}

func (w *worker) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// kick makes the lanes of the given webhooks look at their queue again,
// starting the ones not running.
func (w *worker) kick(ids ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || !w.started {
		return
	}
	for _, id := range ids {
		if l, ok := w.lanes[id]; ok {
			l.kicked = true
			select {
			case l.wake <- struct{}{}:
			default:
			}
			continue
		}
		l := &lane{kicked: true, wake: make(chan struct{}, 1)}
		w.lanes[id] = l
		w.wg.Add(1)
		go w.run(id, l)
	}
}

// pruneEvery is how often the event log is pruned, on one replica at a
// time (the one holding the pruneLease).
const pruneEvery = time.Minute

// pruneLease names the lease of the pruning job.
const pruneLease = "webhooks/prune"

// laneLease names the lease of a webhook's delivery lane.
func laneLease(id string) string { return "webhooks/lane/" + id }

// errLeaseLost reports that a lane's lease went to another replica before
// its outcomes were recorded: they are dropped, the new holder attempts
// those deliveries again (same webhook-id).
var errLeaseLost = errors.New("webhooks: the lane's lease was taken over by another replica")

// housekeeping resumes the lanes with pending deliveries this replica can
// take (at start, when the store's outbox, deliveries or webhooks changed,
// through another replica too, and every ten polls for leases that
// expired) and prunes the event log once per pruneEvery, under a lease.
func (w *worker) housekeeping() {
	defer w.wg.Done()
	t := time.NewTicker(w.s.poll)
	defer t.Stop()
	var (
		seen      uint64
		polls     int
		lastPrune time.Time
	)
	for {
		if c := w.s.store.Changes(bucketOutbox, bucketDeliveries, bucketWebhooks); c != seen || polls%10 == 0 {
			seen = c
			w.resume()
		}
		polls++
		if time.Since(lastPrune) >= pruneEvery {
			lastPrune = time.Now()
			if _, err := w.s.leases.Job(w.ctx, pruneLease, pruneEvery, w.s.Prune); err != nil && w.ctx.Err() == nil {
				w.s.log.Error("webhooks: pruning the event log failed", "error", err)
			}
		}
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
	}
}

// resume kicks every enabled webhook with pending deliveries in the
// outbox whose lane this replica may run (its lease is free, expired or this
// replica's): lanes not running start, running ones look again.
func (w *worker) resume() {
	var ids []string
	err := w.s.store.View(w.ctx, func(tx store.Tx) error {
		// One key per webhook: after "<id>/\xff" comes the next webhook.
		after := ""
		for {
			id := ""
			if err := tx.Scan(bucketOutbox, "", after, func(k string, _ []byte) (bool, error) {
				id, _, _ = strings.Cut(k, "/")
				return false, nil
			}); err != nil {
				return err
			}
			if id == "" {
				return nil
			}
			after = id + "/\xff"
			// A disabled webhook's deliveries are paused (its lane would
			// find nothing to do); one whose lease another replica holds
			// is that replica's.
			if wh, err := getWebhook(tx, id); err != nil && errs.KindOf(err) != errs.NotFound {
				return err
			} else if err != nil || !wh.Enabled {
				continue
			}
			if free, err := w.s.leases.Free(tx, laneLease(id)); err != nil {
				return err
			} else if free {
				ids = append(ids, id)
			}
		}
	})
	if err != nil {
		if w.ctx.Err() == nil {
			w.s.log.Error("webhooks: reading the outbox failed", "error", err)
		}
		return
	}
	w.kick(ids...)
}

// run is a lane: while it holds the webhook's lease it delivers the
// webhook's pending deliveries in order until there are none (or the
// webhook is gone or disabled), sleeping until the head's next attempt
// when it is not yet due. It renews the lease every third of its TTL and
// releases it when it ends, unless another replica took it over.
func (w *worker) run(id string, l *lane) {
	defer w.wg.Done()
	name, ttl := laneLease(id), w.s.leaseTTL
	backoff := time.Second
	var renewed time.Time // when the lease was last taken or renewed; zero: not held
	release := func() {
		if renewed.IsZero() {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 5*time.Second)
		defer cancel()
		if err := w.s.leases.Release(ctx, name); err != nil {
			w.s.log.Warn("webhooks: releasing a lane's lease failed; it expires on its own", "webhook", id, "error", err)
		}
		renewed = time.Time{}
	}
	for {
		w.mu.Lock()
		l.kicked = false
		w.mu.Unlock()

		var (
			due  time.Time
			idle bool
			err  error
		)
		if renewed.IsZero() || time.Since(renewed) >= ttl/3 {
			var held bool
			start := time.Now()
			if held, err = w.s.leases.Acquire(w.ctx, name, ttl); err == nil && !held {
				// Another replica runs this lane.
				renewed = time.Time{}
				w.exit(id)
				return
			} else if err == nil {
				renewed = start
			}
		}
		if err == nil {
			due, idle, err = w.step(id)
		}
		switch {
		case w.stopping():
			release()
			w.exit(id)
			return
		case errors.Is(err, errLeaseLost):
			w.s.log.Warn("webhooks: another replica took this webhook's deliveries over", "webhook", id)
			w.exit(id)
			return
		case err != nil:
			w.s.log.Error("webhooks: delivery lane failed; retrying", "webhook", id, "error", err)
			due, backoff = time.Now().Add(backoff), min(2*backoff, time.Minute)
		case idle:
			release()
			w.mu.Lock()
			if !l.kicked {
				delete(w.lanes, id)
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			continue
		default:
			backoff = time.Second
		}
		if d := time.Until(due); !due.IsZero() && d > 0 {
			if !renewed.IsZero() {
				d = min(d, time.Until(renewed.Add(ttl/3)))
			}
			t := time.NewTimer(d)
			select {
			case <-w.stop:
				t.Stop()
				release()
				w.exit(id)
				return
			case <-l.wake:
			case <-t.C:
			}
			t.Stop()
		}
	}
}

func (w *worker) exit(id string) {
	w.mu.Lock()
	delete(w.lanes, id)
	w.mu.Unlock()
}

// pendingItem is a delivery ready to attempt with what it needs.
type pendingItem struct {
	d    Delivery
	key  string // outbox key
	body []byte // nil when the event is no longer retained
}

// outcome is the result of one attempt.
type outcome struct {
	item     pendingItem
	ok       bool
	at       time.Time
	code     int
	err      string
	duration time.Duration
}

// step loads the head of the webhook's queue (a batch of it) and attempts
// what is due, in order, stopping at the first failure. It returns when
// to look again (zero: at once), or idle when there is nothing to do.
func (w *worker) step(id string) (due time.Time, idle bool, err error) {
	var (
		wh    Webhook
		keys  [][]byte
		items []pendingItem
	)
	now := w.s.now()
	err = w.s.store.View(w.ctx, func(tx store.Tx) error {
		var err error
		if wh, err = getWebhook(tx, id); err != nil {
			if errs.KindOf(err) == errs.NotFound {
				return nil
			}
			return err
		}
		if !wh.Enabled {
			return nil
		}
		if keys, err = w.s.signingKeys(tx, wh, now); err != nil {
			return err
		}
		return tx.Scan(bucketOutbox, id+"/", "", func(k string, v []byte) (bool, error) {
			d, err := getDelivery(tx, id, string(v))
			if err != nil {
				if errs.KindOf(err) == errs.NotFound {
					return true, nil // dangling queue entry (cannot happen); skip it
				}
				return false, err
			}
			it := pendingItem{d: d, key: k}
			if ev := tx.Get(bucketEvents, d.EventID); ev != nil {
				it.body = bytes.Clone(ev)
			}
			items = append(items, it)
			return len(items) < batchSize, nil
		})
	})
	if err != nil {
		return time.Time{}, false, err
	}
	if !wh.Enabled || len(items) == 0 {
		return time.Time{}, true, nil
	}
	if next := items[0].d.NextAttemptAt; next != nil && next.After(now) {
		return *next, false, nil
	}
	var outs []outcome
	start := time.Now()
	for _, it := range items {
		if next := it.d.NextAttemptAt; next != nil && next.After(w.s.now()) {
			break
		}
		if w.stopping() || (len(outs) > 0 && time.Since(start) > batchTime) {
			break
		}
		o, aborted := w.attempt(wh, keys, it)
		if aborted {
			break
		}
		outs = append(outs, o)
		if !o.ok {
			break
		}
	}
	if len(outs) == 0 {
		return time.Time{}, false, nil
	}
	// Record outcomes even while shutting down: they happened.
	return time.Time{}, false, w.s.commit(id, outs)
}

// attempt makes one delivery attempt; aborted reports that the worker is
// stopping and the attempt did not complete (it does not count).
func (w *worker) attempt(wh Webhook, keys [][]byte, it pendingItem) (o outcome, aborted bool) {
	o.item = it
	if it.body == nil {
		o.at = w.s.now()
		o.err = "event " + it.d.EventID + " is no longer retained"
		return o, false
	}
	select {
	case w.sem <- struct{}{}:
	case <-w.stop:
		return o, true
	}
	defer func() { <-w.sem }()

	ctx, cancel := context.WithTimeout(w.ctx, w.s.cfg.AttemptTimeout.D())
	defer cancel()
	start := time.Now()
	o.at = w.s.now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wh.URL, bytes.NewReader(it.body))
	if err != nil {
		o.err = "cannot build the request: invalid URL"
		return o, false
	}
	ts := o.at.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(HeaderID, it.d.EventID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(it.d.EventID, ts, it.body, keys...))
	res, err := w.s.client.Do(req)
	o.duration = time.Since(start)
	if err != nil {
		if w.ctx.Err() != nil {
			return o, true
		}
		o.err = w.describe(err)
		return o, false
	}
	// Drain a little of the body so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	o.code = res.StatusCode
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		o.ok = true
	case res.StatusCode >= 300 && res.StatusCode < 400:
		o.err = fmt.Sprintf("receiver answered %d (redirect); redirects are not followed, configure the final URL", res.StatusCode)
	default:
		o.err = fmt.Sprintf("receiver answered %d; want 2xx", res.StatusCode)
	}
	return o, false
}

// describe explains a transport error without the URL (which may carry a
// token in its path or query) and without anything else secret.
func (w *worker) describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var e *errs.Error
	var ne net.Error
	var msg string
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		msg = fmt.Sprintf("no response within %s (webhooks.attemptTimeout)", w.s.cfg.AttemptTimeout.D())
	case errors.As(err, &e):
		msg = e.Message
	default:
		msg = err.Error()
	}
	if len(msg) > maxErrorLength {
		msg = msg[:maxErrorLength]
	}
	return msg
}

// commit records attempt outcomes in one transaction: each delivery's
// status, attempts and next attempt, its queue entry, and the webhook's
// health (failingSince; disabled after failing for webhooks.disableAfter).
// It fails with errLeaseLost, recording nothing, unless this replica holds
// the webhook's lane lease.
func (s *Service) commit(id string, outs []outcome) error {
	return s.store.Update(context.Background(), func(tx store.Tx) error {
		if held, err := s.leases.Held(tx, laneLease(id)); err != nil {
			return err
		} else if !held {
			return errLeaseLost
		}
		wh, err := getWebhook(tx, id)
		if err != nil {
			if errs.KindOf(err) == errs.NotFound {
				return nil // deleted meanwhile, with its deliveries
			}
			return err
		}
		before := wh
		for _, o := range outs {
			if o.ok {
				wh.FailingSince = nil
			} else if wh.FailingSince == nil {
				t := o.at
				wh.FailingSince = &t
			}
			d, err := getDelivery(tx, id, o.item.d.ID)
			if err != nil {
				if errs.KindOf(err) == errs.NotFound {
					if err := tx.Delete(bucketOutbox, o.item.key); err != nil {
						return err
					}
					continue
				}
				return err
			}
			at := o.at
			d.Attempts++
			d.RunAttempts++
			d.LastAttemptAt = &at
			d.LastResponseCode = o.code
			d.LastError = o.err
			d.LastDurationMs = o.duration.Milliseconds()
			switch {
			case o.ok:
				d.Status, d.NextAttemptAt = StatusSucceeded, nil
			case o.item.body == nil || d.RunAttempts > len(s.cfg.RetrySchedule):
				d.Status, d.NextAttemptAt = StatusFailed, nil
			default:
				// A delivery is retried until its own run would have ended
				// (s.deadline after it started): one that waited long behind
				// earlier deliveries gets fewer retries, down to a single
				// attempt, so that a backlog drains after a long outage.
				next := s.nextAttempt(at, d.RunAttempts)
				if next.After(d.RunStartedAt.Add(s.deadline)) {
					d.Status, d.NextAttemptAt = StatusFailed, nil
				} else {
					d.NextAttemptAt = &next
				}
			}
			if err := putDelivery(tx, d); err != nil {
				return err
			}
			observeAttempt(tx, d.Status, o.duration)
			if d.Status != StatusPending {
				if err := tx.Delete(bucketOutbox, o.item.key); err != nil {
					return err
				}
			}
		}
		last := outs[len(outs)-1]
		if !last.ok && wh.Enabled && wh.FailingSince != nil && last.at.Sub(*wh.FailingSince) >= s.cfg.DisableAfter.D() {
			t := last.at
			wh.Enabled = false
			wh.DisabledAt = &t
			wh.DisabledReason = fmt.Sprintf("deliveries failed continuously since %s (webhooks.disableAfter is %s); last error: %s",
				wh.FailingSince.Format(time.RFC3339), s.cfg.DisableAfter.D(), last.err)
			wh.UpdatedAt = t
			wh.Version++
			s.log.Warn("webhooks: disabled a webhook failing continuously", "webhook", id, "failingSince", wh.FailingSince.Format(time.RFC3339))
			if err := bumpRev(tx); err != nil {
				return err
			}
		}
		if !sameHealth(before, wh) {
			if err := store.PutJSON(tx, bucketWebhooks, id, wh); err != nil {
				return err
			}
		}
		return nil
	})
}

func sameHealth(a, b Webhook) bool {
	eq := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	return a.Enabled == b.Enabled && eq(a.FailingSince, b.FailingSince) && eq(a.DisabledAt, b.DisabledAt)
}
