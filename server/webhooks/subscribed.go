package webhooks

import (
	"context"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// webhooksBucket spares Subscribed a variadic slice per call.
var webhooksBucket = []string{bucketWebhooks}

// listeningIndex is which event types enabled webhooks subscribe to, read
// when the store's webhooks bucket had seen `changes` writes.
type listeningIndex struct {
	changes uint64
	all     bool // some webhook subscribes to "*"
	types   map[string]bool
}

// Subscribed reports whether some enabled webhook subscribes to
// eventType (an opt-in type only when listed explicitly), so that a hot
// path builds an event nobody would receive only when somebody listens.
// While the webhooks are unchanged it costs an atomic load of the store's
// change count and a map lookup; after any webhook write it reads the
// webhooks again. When they cannot be read it answers true: the Recorder
// decides then.
func (s *Service) Subscribed(eventType string) bool {
	ch := s.store.Changes(webhooksBucket...)
	idx := s.listening.Load()
	if idx == nil || idx.changes != ch {
		var err error
		if idx, err = s.loadListening(ch); err != nil {
			s.log.Warn("webhooks: cannot read subscriptions", "error", err.Error())
			return true
		}
	}
	return idx.types[eventType] || (idx.all && !OptIn(eventType))
}

// loadListening reads the subscriptions of the enabled webhooks and keeps
// them as of changes (read before them, so that a write in between makes
// the next call read again).
func (s *Service) loadListening(changes uint64) (*listeningIndex, error) {
	var subs []subscription
	err := s.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		subs, err = readSubscriptions(tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The union of the subscriptions: some webhook wants t exactly when
	// its subscription.wants(t).
	idx := &listeningIndex{changes: changes, types: map[string]bool{}}
	for _, sub := range subs {
		idx.all = idx.all || sub.all
		for t := range sub.types {
			idx.types[t] = true
		}
	}
	s.listening.Store(idx)
	return idx, nil
}
