package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// EventQuery selects a page of events.
type EventQuery struct {
	// Type, when set, keeps only events of that type.
	Type string
	// Oldest lists oldest first; newest first otherwise.
	Oldest bool
	// Cursor is the id of the last event of the previous page.
	Cursor string
	Limit  int
}

// maxScan bounds the entries a filtered page looks at, so that a rare type
// or status cannot make one request read the whole log; the page then ends
// early (possibly empty) with a cursor to continue from.
const maxScan = 5000

// ListEvents returns a page of retained events and the cursor of the next
// page ("" on the last).
func (s *Service) ListEvents(ctx context.Context, q EventQuery) ([]Event, string, error) {
	if q.Type != "" && !KnownEventType(q.Type) {
		return nil, "", errs.Problems("invalid event query", []errs.Problem{{Field: "type", Problem: fmt.Sprintf("unknown event type %q", q.Type)}})
	}
	prefix, after := descPrefix, ""
	if q.Oldest {
		prefix = eventPrefix
	}
	if q.Cursor != "" {
		h, ok := idHex(q.Cursor, eventPrefix)
		if !ok {
			return nil, "", errs.E(errs.Invalid, "query parameter cursor is not a cursor this list returned").
				WithDetails(map[string]any{"problems": []errs.Problem{{Field: "cursor", Problem: "must be the nextCursor of a previous page"}}})
		}
		after = q.Cursor
		if !q.Oldest {
			after = descPrefix + invert(h)
		}
	}
	limit := max(q.Limit, 1)
	var (
		out  []Event
		next string
	)
	err := s.store.View(ctx, func(tx store.Tx) error {
		scanned, last := 0, ""
		return tx.Scan(bucketEvents, prefix, after, func(k string, v []byte) (bool, error) {
			if len(out) == limit || scanned == maxScan {
				next = last
				return false, nil
			}
			raw := v
			if !q.Oldest {
				if raw = tx.Get(bucketEvents, string(v)); raw == nil {
					return true, nil // pruned under the index; skip
				}
			}
			var ev Event
			if err := json.Unmarshal(raw, &ev); err != nil {
				return false, fmt.Errorf("decode event %s: %w", k, err)
			}
			scanned++
			last = ev.ID
			if q.Type == "" || ev.Type == q.Type {
				out = append(out, ev)
			}
			return true, nil
		})
	})
	return out, next, err
}

// GetEvent returns one retained event.
func (s *Service) GetEvent(ctx context.Context, id string) (Event, error) {
	var ev Event
	if _, ok := idHex(id, eventPrefix); !ok {
		return ev, errs.E(errs.NotFound, "event %q not found", id)
	}
	err := s.store.View(ctx, func(tx store.Tx) error {
		if err := store.GetJSON(tx, bucketEvents, id, &ev); err != nil {
			if errs.KindOf(err) == errs.NotFound {
				return errs.E(errs.NotFound, "event %q not found (events are kept for %s, at most %d)", id, s.cfg.Retention.D(), s.cfg.MaxEvents)
			}
			return err
		}
		return nil
	})
	return ev, err
}

// DeliveryQuery selects a page of one webhook's deliveries, newest first.
type DeliveryQuery struct {
	// Status, when set, keeps only deliveries with that status.
	Status string
	// Cursor is the id of the last delivery of the previous page.
	Cursor string
	Limit  int
}

// ListDeliveries returns a page of a webhook's delivery log, newest first.
func (s *Service) ListDeliveries(ctx context.Context, webhookID string, q DeliveryQuery) ([]Delivery, string, error) {
	switch q.Status {
	case "", StatusPending, StatusSucceeded, StatusFailed:
	default:
		return nil, "", errs.E(errs.Invalid, "query parameter status must be pending, succeeded or failed, got %q", q.Status)
	}
	after := ""
	if q.Cursor != "" {
		h, ok := idHex(q.Cursor, deliveryPrefix)
		if !ok {
			return nil, "", errs.E(errs.Invalid, "query parameter cursor is not a cursor this list returned")
		}
		after = deliveryKey(webhookID, h)
	}
	limit := max(q.Limit, 1)
	var (
		out  []Delivery
		next string
	)
	err := s.store.View(ctx, func(tx store.Tx) error {
		if _, err := getWebhook(tx, webhookID); err != nil {
			return err
		}
		scanned, last := 0, ""
		return tx.Scan(bucketDeliveries, webhookID+"/", after, func(k string, v []byte) (bool, error) {
			if len(out) == limit || scanned == maxScan {
				next = last
				return false, nil
			}
			var d Delivery
			if err := json.Unmarshal(v, &d); err != nil {
				return false, fmt.Errorf("decode delivery %s: %w", k, err)
			}
			scanned++
			last = d.ID
			if q.Status == "" || d.Status == q.Status {
				out = append(out, d)
			}
			return true, nil
		})
	})
	return out, next, err
}

// GetDelivery returns one delivery of a webhook.
func (s *Service) GetDelivery(ctx context.Context, webhookID, deliveryID string) (Delivery, error) {
	var d Delivery
	err := s.store.View(ctx, func(tx store.Tx) error {
		if _, err := getWebhook(tx, webhookID); err != nil {
			return err
		}
		var err error
		d, err = getDelivery(tx, webhookID, deliveryID)
		return err
	})
	return d, err
}

// Retry schedules a delivery for an immediate attempt, whatever its status
// (a succeeded one is delivered again), with a fresh retry schedule. It
// keeps its place in the webhook's order: it goes before later pending
// deliveries. A disabled webhook's deliveries cannot be retried (errs.Conflict).
func (s *Service) Retry(ctx context.Context, webhookID, deliveryID string) (Delivery, error) {
	var d Delivery
	err := s.store.Update(ctx, func(tx store.Tx) error {
		w, err := getWebhook(tx, webhookID)
		if err != nil {
			return err
		}
		if d, err = getDelivery(tx, webhookID, deliveryID); err != nil {
			return err
		}
		if !w.Enabled {
			return errs.E(errs.Conflict, "webhook %s is disabled; enable it (PUT with enabled true) to deliver", webhookID)
		}
		if tx.Get(bucketEvents, d.EventID) == nil {
			return errs.E(errs.Conflict, "event %s of delivery %s is no longer retained; it cannot be delivered again", d.EventID, d.ID)
		}
		now := s.now()
		d.Status, d.NextAttemptAt, d.RunStartedAt, d.RunAttempts = StatusPending, &now, now, 0
		if err := putDelivery(tx, d); err != nil {
			return err
		}
		h, _ := idHex(d.ID, deliveryPrefix)
		if err := tx.Put(bucketOutbox, outboxKey(webhookID, h), []byte(d.ID)); err != nil {
			return err
		}
		tx.OnCommit(func() { s.worker.kick(webhookID) })
		return nil
	})
	return d, err
}

// Test emits a webhook.test event (its data is the webhook) to this
// webhook only, and returns its pending delivery.
func (s *Service) Test(ctx context.Context, webhookID string) (Delivery, error) {
	var d Delivery
	err := s.store.Update(ctx, func(tx store.Tx) error {
		w, err := getWebhook(tx, webhookID)
		if err != nil {
			return err
		}
		if !w.Enabled {
			return errs.E(errs.Conflict, "webhook %s is disabled; enable it (PUT with enabled true) to test it", webhookID)
		}
		_, ds, err := s.record(tx, events.WebhookTest, w, webhookID)
		if err != nil {
			return err
		}
		d = ds[0]
		return nil
	})
	return d, err
}

// nextAttempt returns when to retry after the n-th failed attempt of the
// current run (1-based), with ±20% jitter.
func (s *Service) nextAttempt(now time.Time, n int) time.Time {
	d := s.cfg.RetrySchedule[n-1].D()
	j := time.Duration((jitter() - 0.5) * 0.4 * float64(d))
	return now.Add(d + j)
}
