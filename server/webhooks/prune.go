package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// pruneBatch bounds the deletions of one pruning transaction, so that
// pruning never holds the store's write lock for long.
const pruneBatch = 1000

// Prune applies retention: it deletes events older than webhooks.retention
// or beyond the newest webhooks.maxEvents, except events with pending
// deliveries; the delivery log entries of deleted events; and rotated-out
// secrets whose grace period is over.
func (s *Service) Prune(ctx context.Context) error {
	now := s.now()
	cutoff := now.Add(-s.cfg.Retention.D())
	// Collect the victims in a read transaction, delete them in small
	// write transactions.
	var (
		victims []string // event ids
		expired []string // webhook ids with an expired previous secret
	)
	err := s.store.View(ctx, func(tx store.Tx) error {
		pending := map[string]bool{}
		if err := tx.Scan(bucketOutbox, "", "", func(k string, v []byte) (bool, error) {
			if h, ok := idHex(string(v), deliveryPrefix); ok {
				pending[eventPrefix+h] = true
			}
			return true, nil
		}); err != nil {
			return err
		}
		// Newest first: past MaxEvents, or older than the cutoff, goes.
		n := 0
		if err := tx.Scan(bucketEvents, descPrefix, "", func(k string, v []byte) (bool, error) {
			n++
			id := string(v)
			if pending[id] {
				return true, nil
			}
			if n > s.cfg.MaxEvents {
				victims = append(victims, id)
				return true, nil
			}
			h, ok := idHex(id, eventPrefix)
			if !ok || timeOf(h).Before(cutoff) {
				victims = append(victims, id)
			}
			return true, nil
		}); err != nil {
			return err
		}
		return tx.Scan(bucketWebhooks, webhookPrefix, "", func(k string, v []byte) (bool, error) {
			var w Webhook
			if err := json.Unmarshal(v, &w); err != nil {
				return false, fmt.Errorf("decode webhook %s: %w", k, err)
			}
			if w.PreviousSecretExpiresAt != nil && !now.Before(*w.PreviousSecretExpiresAt) {
				expired = append(expired, w.ID)
			}
			return true, nil
		})
	})
	if err != nil {
		return err
	}
	for len(victims) > 0 {
		n := min(len(victims), pruneBatch)
		batch := victims[:n]
		victims = victims[n:]
		if err := s.store.Update(ctx, func(tx store.Tx) error {
			for _, id := range batch {
				h, ok := idHex(id, eventPrefix)
				if !ok {
					continue
				}
				if err := tx.Delete(bucketEvents, id); err != nil {
					return err
				}
				if err := tx.Delete(bucketEvents, descPrefix+invert(h)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if err := s.pruneDeliveries(ctx); err != nil {
		return err
	}
	for _, id := range expired {
		if err := s.store.Update(ctx, func(tx store.Tx) error {
			w, err := getWebhook(tx, id)
			if err != nil || w.PreviousSecretExpiresAt == nil || now.Before(*w.PreviousSecretExpiresAt) {
				return nil // gone or rotated again meanwhile
			}
			if err := s.vault.Delete(tx, previousRef(id)); err != nil {
				return err
			}
			w.PreviousSecretExpiresAt = nil
			return store.PutJSON(tx, bucketWebhooks, id, w)
		}); err != nil {
			return err
		}
	}
	return nil
}

// pruneDeliveries deletes the finished deliveries whose event is gone.
func (s *Service) pruneDeliveries(ctx context.Context) error {
	after := ""
	for {
		var (
			victims []string
			last    string
		)
		err := s.store.View(ctx, func(tx store.Tx) error {
			return tx.Scan(bucketDeliveries, "", after, func(k string, _ []byte) (bool, error) {
				last = k
				wh, inv, ok := strings.Cut(k, "/")
				if !ok {
					return true, nil
				}
				if len(inv) != idHexLen {
					return true, nil
				}
				h := invert(inv)
				if tx.Get(bucketEvents, eventPrefix+h) == nil && tx.Get(bucketOutbox, wh+"/"+seqOf(h)) == nil {
					victims = append(victims, k)
				}
				return len(victims) < pruneBatch, nil
			})
		})
		if err != nil {
			return err
		}
		if len(victims) > 0 {
			if err := s.store.Update(ctx, func(tx store.Tx) error {
				for _, k := range victims {
					if err := tx.Delete(bucketDeliveries, k); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				return err
			}
		}
		if len(victims) < pruneBatch || last == "" {
			return nil
		}
		after = last
	}
}
