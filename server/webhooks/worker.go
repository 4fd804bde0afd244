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
// pending and are delivered again after a restart). The outcomes of
// finished attempts are recorded before Close returns.
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

func (w *worker) housekeeping() {
	defer w.wg.Done()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		w.resume()
		if err := w.s.Prune(w.ctx); err != nil && w.ctx.Err() == nil {
			w.s.log.Error("webhooks: pruning the event log failed", "error", err)
		}
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
	}
}

// resume kicks every webhook with pending deliveries in the outbox.
func (w *worker) resume() {
	var ids []string
	err := w.s.store.View(w.ctx, func(tx store.Tx) error {
		return tx.Scan(bucketOutbox, "", "", func(k string, _ []byte) (bool, error) {
			id, _, _ := strings.Cut(k, "/")
			if len(ids) == 0 || ids[len(ids)-1] != id {
				ids = append(ids, id)
			}
			return true, nil
		})
	})
	if err != nil {
		if w.ctx.Err() == nil {
			w.s.log.Error("webhooks: reading the outbox failed", "error", err)
		}
		return
	}
	w.kick(ids...)
}

// run is a lane: it delivers its webhook's pending deliveries in order
// until there are none (or the webhook is gone or disabled), sleeping
// until the head's next attempt when it is not yet due.
func (w *worker) run(id string, l *lane) {
	defer w.wg.Done()
	backoff := time.Second
	for {
		w.mu.Lock()
		l.kicked = false
		w.mu.Unlock()

		due, idle, err := w.step(id)
		switch {
		case w.stopping():
			w.exit(id)
			return
		case err != nil:
			w.s.log.Error("webhooks: delivery lane failed; retrying", "webhook", id, "error", err)
			due, backoff = time.Now().Add(backoff), min(2*backoff, time.Minute)
		case idle:
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
			t := time.NewTimer(d)
			select {
			case <-w.stop:
				t.Stop()
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
func (s *Service) commit(id string, outs []outcome) error {
	return s.store.Update(context.Background(), func(tx store.Tx) error {
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
