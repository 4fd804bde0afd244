package config

import (
	"fmt"
	"time"
)

// Webhooks configures webhook delivery and the event log.
type Webhooks struct {
	// AttemptTimeout bounds one delivery attempt, connect to last byte of
	// the response headers (default 15s).
	AttemptTimeout Duration `yaml:"attemptTimeout"`
	// RetrySchedule is the delay before each retry of a failed delivery
	// (default 5s, 5m, 30m, 2h, 5h, 10h, 10h: eight attempts over about
	// 27 hours). Each delay gets ±20% jitter.
	RetrySchedule []Duration `yaml:"retrySchedule"`
	// DisableAfter disables a webhook whose deliveries have failed
	// continuously for this long (default 120h, 5 days).
	DisableAfter Duration `yaml:"disableAfter"`
	// SecretGracePeriod is how long a rotated-out secret keeps signing
	// deliveries beside the new one (default 24h).
	SecretGracePeriod Duration `yaml:"secretGracePeriod"`
	// Retention is how long events and their delivery log are kept
	// (default 720h, 30 days); events with pending deliveries are kept.
	Retention Duration `yaml:"retention"`
	// MaxEvents caps the number of events kept (default 10000).
	MaxEvents int `yaml:"maxEvents"`
	// Concurrency caps the delivery attempts in flight across all webhooks
	// (default 32); each webhook has at most one in flight (in-order delivery).
	Concurrency int `yaml:"concurrency"`
}

// Defaults of the webhook settings.
const (
	DefaultWebhookAttemptTimeout = 15 * time.Second
	DefaultWebhookDisableAfter   = 5 * 24 * time.Hour
	DefaultWebhookSecretGrace    = 24 * time.Hour
	DefaultWebhookRetention      = 30 * 24 * time.Hour
	DefaultWebhookMaxEvents      = 10000
	DefaultWebhookConcurrency    = 32
)

// DefaultWebhookRetrySchedule is the Standard Webhooks / Svix schedule.
func DefaultWebhookRetrySchedule() []Duration {
	return []Duration{
		Duration(5 * time.Second), Duration(5 * time.Minute), Duration(30 * time.Minute),
		Duration(2 * time.Hour), Duration(5 * time.Hour), Duration(10 * time.Hour), Duration(10 * time.Hour),
	}
}

// WithDefaults returns w with unset values filled in, so that a Config
// built in code (tests) behaves like one loaded from a file.
func (w Webhooks) WithDefaults() Webhooks {
	if w.AttemptTimeout == 0 {
		w.AttemptTimeout = Duration(DefaultWebhookAttemptTimeout)
	}
	if len(w.RetrySchedule) == 0 {
		w.RetrySchedule = DefaultWebhookRetrySchedule()
	}
	if w.DisableAfter == 0 {
		w.DisableAfter = Duration(DefaultWebhookDisableAfter)
	}
	if w.SecretGracePeriod == 0 {
		w.SecretGracePeriod = Duration(DefaultWebhookSecretGrace)
	}
	if w.Retention == 0 {
		w.Retention = Duration(DefaultWebhookRetention)
	}
	if w.MaxEvents == 0 {
		w.MaxEvents = DefaultWebhookMaxEvents
	}
	if w.Concurrency == 0 {
		w.Concurrency = DefaultWebhookConcurrency
	}
	return w
}

func (c Config) validateWebhooks() []string {
	w := c.Webhooks
	var ps []string
	if w.AttemptTimeout < 0 {
		ps = append(ps, "webhooks.attemptTimeout must be positive")
	}
	if len(w.RetrySchedule) > 50 {
		ps = append(ps, fmt.Sprintf("webhooks.retrySchedule has %d entries; at most 50", len(w.RetrySchedule)))
	}
	for i, d := range w.RetrySchedule {
		if d <= 0 {
			ps = append(ps, fmt.Sprintf("webhooks.retrySchedule[%d] must be positive", i))
		}
	}
	if w.DisableAfter < 0 {
		ps = append(ps, "webhooks.disableAfter must be positive")
	}
	if w.SecretGracePeriod < 0 {
		ps = append(ps, "webhooks.secretGracePeriod must not be negative")
	}
	if w.Retention < 0 {
		ps = append(ps, "webhooks.retention must be positive")
	}
	if w.MaxEvents < 0 {
		ps = append(ps, "webhooks.maxEvents must be positive")
	}
	if w.Concurrency < 0 {
		ps = append(ps, "webhooks.concurrency must be positive")
	}
	return ps
}
