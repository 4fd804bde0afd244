package webhooks

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ids"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// Input is what a caller supplies to create or replace a webhook.
type Input struct {
	URL         string
	Events      []string
	Description string
	// Enabled defaults to true when nil.
	Enabled *bool
	// Secret, when set, is the signing secret ("whsec_..."); on create a
	// random one is generated when empty; on replace empty keeps the
	// current secret and a different one rotates it (with the grace period).
	Secret string
}

// KnownEventTypes returns the known event types, sorted.
func KnownEventTypes() []string {
	out := make([]string, 0, len(eventTypes))
	for t := range eventTypes {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// validate checks in and returns the problems, each naming its field.
func (s *Service) validate(in Input) []errs.Problem {
	var ps []errs.Problem
	ps = append(ps, s.validateURL(in.URL)...)
	switch {
	case len(in.Events) == 0:
		ps = append(ps, errs.Problem{Field: "events", Problem: `must list at least one event type, or "*" for all`})
	case len(in.Events) > MaxEventTypes:
		ps = append(ps, errs.Problem{Field: "events", Problem: fmt.Sprintf("must list at most %d event types, got %d", MaxEventTypes, len(in.Events))})
	default:
		seen := map[string]bool{}
		for i, t := range in.Events {
			f := "events[" + strconv.Itoa(i) + "]"
			switch {
			case t != Wildcard && !KnownEventType(t):
				ps = append(ps, errs.Problem{Field: f, Problem: fmt.Sprintf("unknown event type %q; known: *, %s", t, strings.Join(KnownEventTypes(), ", "))})
			case seen[t]:
				ps = append(ps, errs.Problem{Field: f, Problem: fmt.Sprintf("duplicate event type %q", t)})
			}
			seen[t] = true
		}
	}
	if n := utf8.RuneCountInString(in.Description); n > MaxDescriptionLength {
		ps = append(ps, errs.Problem{Field: "description", Problem: fmt.Sprintf("must be at most %d characters, got %d", MaxDescriptionLength, n)})
	} else if !utf8.ValidString(in.Description) {
		ps = append(ps, errs.Problem{Field: "description", Problem: "must be valid UTF-8"})
	}
	if in.Secret != "" {
		if _, err := ParseSecret(in.Secret); err != nil {
			ps = append(ps, errs.Problem{Field: "secret", Problem: err.(*errs.Error).Message})
		}
	}
	return ps
}

// validateURL checks a webhook URL: absolute http(s), a host, no
// credentials or fragment, and, for an IP literal host, an address the
// egress guard lets through (host names are checked when dialled).
func (s *Service) validateURL(raw string) []errs.Problem {
	bad := func(p string) []errs.Problem { return []errs.Problem{{Field: "url", Problem: p}} }
	if raw == "" {
		return bad("must not be empty")
	}
	if len(raw) > MaxURLLength {
		return bad(fmt.Sprintf("must be at most %d bytes, got %d", MaxURLLength, len(raw)))
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return bad("must not contain spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("is not a valid URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return bad(fmt.Sprintf("must be an absolute http or https URL, got scheme %q", u.Scheme))
	case u.Host == "" || u.Hostname() == "":
		return bad("must have a host")
	case u.User != nil:
		return bad("must not carry credentials (user:password@); authenticate deliveries by their signature")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return bad("must not have a fragment (#...)")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad(fmt.Sprintf("has an invalid port %q", p))
		}
	}
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && s.guard != nil {
		if err := s.guard.Check(a); err != nil {
			var msg string
			if e, ok := err.(*errs.Error); ok {
				msg = e.Message
			} else {
				msg = err.Error()
			}
			return bad(msg)
		}
	}
	return nil
}

// Create stores a new webhook and returns it with its secret, shown only now.
func (s *Service) Create(ctx context.Context, in Input) (Webhook, string, error) {
	if err := errs.Problems("invalid webhook", s.validate(in)); err != nil {
		return Webhook{}, "", err
	}
	secret := in.Secret
	if secret == "" {
		secret = NewSecret()
	}
	now := s.now()
	w := Webhook{
		ID: ids.New(webhookPrefix, now), URL: in.URL, Events: slices.Clone(in.Events), Description: in.Description,
		Enabled: in.Enabled == nil || *in.Enabled, CreatedAt: now, UpdatedAt: now, Version: 1,
	}
	err := s.store.Update(ctx, func(tx store.Tx) error {
		n := 0
		if err := tx.Scan(bucketWebhooks, webhookPrefix, "", func(string, []byte) (bool, error) { n++; return true, nil }); err != nil {
			return err
		}
		if n >= MaxWebhooks {
			return errs.E(errs.Validation, "at most %d webhooks may exist; delete one first", MaxWebhooks).
				WithDetails(map[string]any{"limit": MaxWebhooks})
		}
		if err := s.vault.Put(tx, secretRef(w.ID), []byte(secret)); err != nil {
			return err
		}
		if err := store.PutJSON(tx, bucketWebhooks, w.ID, w); err != nil {
			return err
		}
		return bumpRev(tx)
	})
	if err != nil {
		return Webhook{}, "", err
	}
	return w, secret, nil
}

// Get returns one webhook.
func (s *Service) Get(ctx context.Context, id string) (Webhook, error) {
	var w Webhook
	err := s.store.View(ctx, func(tx store.Tx) error {
		var err error
		w, err = getWebhook(tx, id)
		return err
	})
	return w, err
}

func getWebhook(tx store.Tx, id string) (Webhook, error) {
	var w Webhook
	if !strings.HasPrefix(id, webhookPrefix) {
		return w, errs.E(errs.NotFound, "webhook %q not found", id)
	}
	if err := store.GetJSON(tx, bucketWebhooks, id, &w); err != nil {
		if errs.KindOf(err) == errs.NotFound {
			return w, errs.E(errs.NotFound, "webhook %q not found", id)
		}
		return w, err
	}
	return w, nil
}

// List returns a page of webhooks, oldest first, after the id cursor.
func (s *Service) List(ctx context.Context, cursor string, limit int) ([]Webhook, string, error) {
	var (
		out  []Webhook
		next string
	)
	err := s.store.View(ctx, func(tx store.Tx) error {
		var err error
		out, next, err = store.Page[Webhook](tx, bucketWebhooks, webhookPrefix, cursor, limit)
		return err
	})
	return out, next, err
}

// checkVersion returns errs.PreconditionFailed unless ifMatch is nil or
// the webhook's version.
func checkVersion(w Webhook, ifMatch *int64) error {
	if ifMatch != nil && *ifMatch != w.Version {
		return errs.E(errs.PreconditionFailed, "webhook %s is at version %d, If-Match asked for %d; read it again and retry", w.ID, w.Version, *ifMatch).
			WithDetails(map[string]any{"version": w.Version})
	}
	return nil
}

// Replace replaces a webhook's url, events, description and enabled flag.
// A secret different from the current one rotates it: the current secret
// keeps signing, beside the new one, for webhooks.secretGracePeriod.
// Re-enabling clears disabledReason/disabledAt and resumes paused
// deliveries.
func (s *Service) Replace(ctx context.Context, id string, in Input, ifMatch *int64) (Webhook, error) {
	if err := errs.Problems("invalid webhook", s.validate(in)); err != nil {
		return Webhook{}, err
	}
	var w Webhook
	err := s.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if w, err = getWebhook(tx, id); err != nil {
			return err
		}
		if err := checkVersion(w, ifMatch); err != nil {
			return err
		}
		now := s.now()
		enabled := in.Enabled == nil || *in.Enabled
		if enabled && !w.Enabled {
			w.DisabledReason, w.DisabledAt, w.FailingSince = "", nil, nil
			if err := s.resumePaused(tx, id, now); err != nil {
				return err
			}
		}
		w.URL, w.Events, w.Description, w.Enabled = in.URL, slices.Clone(in.Events), in.Description, enabled
		if in.Secret != "" {
			cur, err := s.vault.Get(tx, secretRef(id))
			if err != nil {
				return err
			}
			if subtle.ConstantTimeCompare(cur, []byte(in.Secret)) != 1 {
				if err := s.rotate(tx, &w, cur, in.Secret, s.cfg.SecretGracePeriod.D(), now); err != nil {
					return err
				}
			}
		}
		w.UpdatedAt = now
		w.Version++
		if err := store.PutJSON(tx, bucketWebhooks, w.ID, w); err != nil {
			return err
		}
		if w.Enabled {
			tx.OnCommit(func() { s.worker.kick(id) })
		}
		return bumpRev(tx)
	})
	return w, err
}

// resumePaused gives the pending deliveries of a webhook being enabled
// again a fresh retry run starting now, so that time spent paused does not
// count against the retry schedule.
func (s *Service) resumePaused(tx store.Tx, id string, now time.Time) error {
	var ids []string
	if err := tx.Scan(bucketOutbox, id+"/", "", func(_ string, v []byte) (bool, error) {
		ids = append(ids, string(v))
		return true, nil
	}); err != nil {
		return err
	}
	for _, did := range ids {
		d, err := getDelivery(tx, id, did)
		if err != nil {
			if errs.KindOf(err) == errs.NotFound {
				continue
			}
			return err
		}
		d.NextAttemptAt, d.RunStartedAt, d.RunAttempts = &now, now, 0
		if err := putDelivery(tx, d); err != nil {
			return err
		}
	}
	return nil
}

// rotate makes secret the current secret; the old one (cur) stays valid
// for grace (none when 0).
func (s *Service) rotate(tx store.Tx, w *Webhook, cur []byte, secret string, grace time.Duration, now time.Time) error {
	if grace > 0 && cur != nil {
		if err := s.vault.Put(tx, previousRef(w.ID), cur); err != nil {
			return err
		}
		t := now.Add(grace)
		w.PreviousSecretExpiresAt = &t
	} else {
		if err := s.vault.Delete(tx, previousRef(w.ID)); err != nil {
			return err
		}
		w.PreviousSecretExpiresAt = nil
	}
	return s.vault.Put(tx, secretRef(w.ID), []byte(secret))
}

// RotateSecret replaces a webhook's secret with secret (a generated one
// when empty) and returns the webhook and the new secret, shown only now.
// The old secret keeps signing deliveries beside the new one for grace
// (webhooks.secretGracePeriod when nil; 0 ends it at once).
func (s *Service) RotateSecret(ctx context.Context, id, secret string, grace *time.Duration, ifMatch *int64) (Webhook, string, error) {
	var ps []errs.Problem
	if secret != "" {
		if _, err := ParseSecret(secret); err != nil {
			ps = append(ps, errs.Problem{Field: "secret", Problem: err.(*errs.Error).Message})
		}
	} else {
		secret = NewSecret()
	}
	g := s.cfg.SecretGracePeriod.D()
	if grace != nil {
		g = *grace
		if g < 0 || g > MaxGracePeriod {
			ps = append(ps, errs.Problem{Field: "gracePeriodSeconds", Problem: fmt.Sprintf("must be between 0 and %d (7 days)", int(MaxGracePeriod.Seconds()))})
		}
	}
	if err := errs.Problems("invalid secret rotation", ps); err != nil {
		return Webhook{}, "", err
	}
	var w Webhook
	err := s.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if w, err = getWebhook(tx, id); err != nil {
			return err
		}
		if err := checkVersion(w, ifMatch); err != nil {
			return err
		}
		cur, err := s.vault.Get(tx, secretRef(id))
		if err != nil {
			return err
		}
		if subtle.ConstantTimeCompare(cur, []byte(secret)) == 1 {
			return errs.Problems("invalid secret rotation", []errs.Problem{{Field: "secret", Problem: "is the current secret; rotation needs a different one"}})
		}
		now := s.now()
		if err := s.rotate(tx, &w, cur, secret, g, now); err != nil {
			return err
		}
		w.UpdatedAt = now
		w.Version++
		return store.PutJSON(tx, bucketWebhooks, w.ID, w)
	})
	if err != nil {
		return Webhook{}, "", err
	}
	return w, secret, nil
}

// Delete removes a webhook, its secrets, its delivery log and its pending
// deliveries. Its events stay in the event log.
func (s *Service) Delete(ctx context.Context, id string, ifMatch *int64) error {
	return s.store.Update(ctx, func(tx store.Tx) error {
		w, err := getWebhook(tx, id)
		if err != nil {
			return err
		}
		if err := checkVersion(w, ifMatch); err != nil {
			return err
		}
		for _, b := range []string{bucketDeliveries, bucketOutbox} {
			if err := deletePrefix(tx, b, id+"/"); err != nil {
				return err
			}
		}
		if err := s.vault.DeletePrefix(tx, secretPrefix(id)); err != nil {
			return err
		}
		if err := tx.Delete(bucketWebhooks, id); err != nil {
			return err
		}
		tx.OnCommit(func() { s.worker.kick(id) })
		return bumpRev(tx)
	})
}

func deletePrefix(tx store.Tx, bucket, prefix string) error {
	var keys []string
	if err := tx.Scan(bucket, prefix, "", func(k string, _ []byte) (bool, error) {
		keys = append(keys, k)
		return true, nil
	}); err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.Delete(bucket, k); err != nil {
			return err
		}
	}
	return nil
}

// signingKeys returns the keys that sign a webhook's deliveries now: the
// current secret's, and the previous one's during a rotation's grace period.
func (s *Service) signingKeys(tx store.Tx, w Webhook, now time.Time) ([][]byte, error) {
	cur, err := s.vault.Get(tx, secretRef(w.ID))
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, fmt.Errorf("webhook %s has no secret", w.ID)
	}
	k, err := ParseSecret(string(cur))
	if err != nil {
		return nil, fmt.Errorf("webhook %s: stored secret unusable", w.ID)
	}
	keys := [][]byte{k}
	if w.PreviousSecretExpiresAt != nil && now.Before(*w.PreviousSecretExpiresAt) {
		prev, err := s.vault.Get(tx, previousRef(w.ID))
		if err != nil {
			return nil, err
		}
		if pk, err := ParseSecret(string(prev)); err == nil {
			keys = append(keys, pk)
		}
	}
	return keys, nil
}
