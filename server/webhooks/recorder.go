package webhooks

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// subIndex caches which webhooks subscribe to what, valid while the
// store's revKey equals rev.
type subIndex struct {
	rev  string
	subs []subscription
}

type subscription struct {
	id    string
	all   bool
	types map[string]bool
}

func (s subscription) wants(t string) bool {
	return s.types[t] || (s.all && !OptIn(t))
}

// bumpRev marks the subscriptions as changed (every webhook write that
// affects url, events, enabled or existence calls it). The value is random,
// so a rolled-back transaction can never leave a cache looking current.
func bumpRev(tx store.Tx) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	return tx.Put(bucketWebhooks, revKey, []byte(hex.EncodeToString(b[:])))
}

// subscribers returns the ids of the enabled webhooks that want eventType,
// reloading the cache inside tx when the subscriptions changed.
func (s *Service) subscribers(tx store.Tx, eventType string) ([]string, error) {
	rev := string(tx.Get(bucketWebhooks, revKey))
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev != s.subs.rev {
		subs, err := readSubscriptions(tx)
		if err != nil {
			return nil, err
		}
		s.subs = subIndex{rev: rev, subs: subs}
	}
	var ids []string
	for _, sub := range s.subs.subs {
		if sub.wants(eventType) {
			ids = append(ids, sub.id)
		}
	}
	return ids, nil
}

// readSubscriptions reads what each enabled webhook subscribes to.
func readSubscriptions(tx store.Tx) ([]subscription, error) {
	var subs []subscription
	err := tx.Scan(bucketWebhooks, webhookPrefix, "", func(k string, v []byte) (bool, error) {
		var w Webhook
		if err := json.Unmarshal(v, &w); err != nil {
			return false, fmt.Errorf("decode webhook %s: %w", k, err)
		}
		if !w.Enabled {
			return true, nil
		}
		sub := subscription{id: w.ID, types: map[string]bool{}}
		for _, t := range w.Events {
			if t == Wildcard {
				sub.all = true
			} else {
				sub.types[t] = true
			}
		}
		subs = append(subs, sub)
		return true, nil
	})
	return subs, err
}

// Record implements events.Recorder: inside the caller's write transaction
// it stores the event and one pending delivery per enabled webhook
// subscribed to its type, and wakes the worker once the transaction
// commits. Opt-in types (action.invoked, action.failed) are stored only
// when some webhook subscribes to them, so that their volume does not push
// other events out of the retained log.
func (s *Service) Record(tx store.Tx, eventType string, data any) error {
	_, _, err := s.record(tx, eventType, data, "")
	return err
}

// record stores an event and its deliveries: to the subscribers, or only to
// webhook `only` when it is set. It returns the event and the deliveries.
func (s *Service) record(tx store.Tx, eventType string, data any, only string) (Event, []Delivery, error) {
	if !tx.Writable() {
		return Event{}, nil, fmt.Errorf("webhooks: Record needs a write transaction")
	}
	if !KnownEventType(eventType) {
		return Event{}, nil, fmt.Errorf("webhooks: unknown event type %q", eventType)
	}
	targets := []string{only}
	if only == "" {
		var err error
		if targets, err = s.subscribers(tx, eventType); err != nil {
			return Event{}, nil, err
		}
		if OptIn(eventType) && len(targets) == 0 {
			return Event{}, nil, nil
		}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return Event{}, nil, fmt.Errorf("webhooks: encode %s data: %w", eventType, err)
	}
	seq, err := tx.NextSequence(bucketEvents)
	if err != nil {
		return Event{}, nil, err
	}
	now := s.now().Truncate(time.Millisecond)
	h := newEventHex(now, seq)
	ev := Event{ID: eventPrefix + h, Type: eventType, CreatedAt: now, Data: raw}
	if err := store.PutJSON(tx, bucketEvents, ev.ID, ev); err != nil {
		return Event{}, nil, err
	}
	if err := tx.Put(bucketEvents, descPrefix+invert(h), []byte(ev.ID)); err != nil {
		return Event{}, nil, err
	}
	ds := make([]Delivery, 0, len(targets))
	for _, wh := range targets {
		d := Delivery{
			ID: deliveryPrefix + h, WebhookID: wh, EventID: ev.ID, EventType: eventType,
			Status: StatusPending, CreatedAt: now, NextAttemptAt: &now, RunStartedAt: now,
		}
		if err := putDelivery(tx, d); err != nil {
			return Event{}, nil, err
		}
		if err := tx.Put(bucketOutbox, outboxKey(wh, h), []byte(d.ID)); err != nil {
			return Event{}, nil, err
		}
		ds = append(ds, d)
	}
	if len(targets) > 0 {
		ids := slices.Clone(targets)
		tx.OnCommit(func() { s.worker.kick(ids...) })
	}
	return ev, ds, nil
}

func deliveryKey(webhookID, h string) string { return webhookID + "/" + invert(h) }
func outboxKey(webhookID, h string) string   { return webhookID + "/" + seqOf(h) }

func putDelivery(tx store.Tx, d Delivery) error {
	h, _ := idHex(d.ID, deliveryPrefix)
	return store.PutJSON(tx, bucketDeliveries, deliveryKey(d.WebhookID, h), d)
}

// getDelivery loads a delivery by webhook and delivery id; errs.NotFound
// when there is none.
func getDelivery(tx store.Tx, webhookID, deliveryID string) (Delivery, error) {
	h, ok := idHex(deliveryID, deliveryPrefix)
	var d Delivery
	if !ok {
		return d, errs.E(errs.NotFound, "delivery %q not found for webhook %s", deliveryID, webhookID)
	}
	if err := store.GetJSON(tx, bucketDeliveries, deliveryKey(webhookID, h), &d); err != nil {
		if errs.KindOf(err) == errs.NotFound {
			return d, errs.E(errs.NotFound, "delivery %q not found for webhook %s", deliveryID, webhookID)
		}
		return d, err
	}
	return d, nil
}
