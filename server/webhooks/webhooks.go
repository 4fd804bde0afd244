// Package webhooks delivers Switchboard's events to subscribers' HTTP
// endpoints, signed as the Standard Webhooks specification says.
//
// Storage (all in the store, so that nothing pending is lost on a restart
// or a crash):
//
//   - "events": every event under its id ("evt_..." sorting by creation
//     time) as {id, type, createdAt, data}, plus a "desc/" index in reverse
//     order for newest-first listing.
//   - "webhooks": webhook configs under their id ("wh_..."), and "~rev", a
//     random value changed by every write that affects subscriptions (the
//     Recorder's cache key). Secrets are sealed by the vault under
//     "webhook/<id>/secret" and "webhook/<id>/previous".
//   - "deliveries": one record per (webhook, event) under
//     "<webhook>/<inverted event hex>", newest first: the delivery log.
//   - "outbox": the pending deliveries of each webhook under
//     "<webhook>/<event sequence>", oldest first: the delivery queue.
//
// The Recorder (Service.Record) writes an event and its pending deliveries
// in the caller's transaction (the outbox pattern) and, once it commits,
// wakes the Worker. The Worker runs one lane per webhook with pending
// deliveries, delivering them in order of creation, at least once, retrying
// failures on the configured schedule with jitter; lanes run concurrently so
// that one slow receiver delays only its own webhook.
//
// Several replicas may share the store. A lane runs only on the replica
// holding the webhook's lease ("webhooks/lane/<id>" in the leases bucket),
// renewed while it works and released when it runs out of work or the
// replica closes; its outcomes are recorded only if it still holds the
// lease in the recording transaction, so that a replica that lost its lease
// (paused past the expiry) cannot overwrite the new holder's progress. Each
// replica watches the store (Store.Changes of the outbox, deliveries and
// webhooks, and a periodic rescan) for work enqueued through other
// replicas and for leases that expired with their replica, and takes the
// lanes it can.
package webhooks

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/lease"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// Bucket names.
const (
	bucketEvents     = "events"
	bucketWebhooks   = "webhooks"
	bucketDeliveries = "deliveries"
	bucketOutbox     = "outbox"
	// revKey in bucketWebhooks changes whenever subscriptions change.
	revKey = "~rev"
	// descPrefix starts the newest-first index keys in bucketEvents.
	descPrefix = "desc/"
)

// Delivery statuses.
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Wildcard subscribes a webhook to every event type except the opt-in ones.
const Wildcard = "*"

// Limits on what a caller sends.
const (
	MaxURLLength         = 2048
	MaxDescriptionLength = 1024
	MaxEventTypes        = 32
	MaxWebhooks          = 100
	// MaxGracePeriod caps a secret rotation's grace period.
	MaxGracePeriod = 7 * 24 * time.Hour
)

// eventTypes are the known event types; true marks opt-in types, delivered
// only to webhooks that list them explicitly (not via "*").
var eventTypes = map[string]bool{
	events.ConnectorCreated:         false,
	events.ConnectorUpdated:         false,
	events.ConnectorDeleted:         false,
	events.ActionCreated:            false,
	events.ActionUpdated:            false,
	events.ActionDeleted:            false,
	events.ActionInvoked:            true,
	events.ActionFailed:             true,
	events.ConnectionCreated:        false,
	events.ConnectionUpdated:        false,
	events.ConnectionDeleted:        false,
	events.ConnectionReauthRequired: false,
	events.APIKeyCreated:            false,
	events.APIKeyRevoked:            false,
	events.APIKeyUpdated:            false,
	events.WebhookTest:              false,
	events.ToolsetCreated:           false,
	events.ToolsetUpdated:           false,
	events.ToolsetDeleted:           false,
	events.BudgetAlert:              false,
	events.BudgetExhausted:          false,
	events.FallbackUsed:             false,
	events.ProviderUnhealthy:        false,
	events.ProviderRecovered:        false,
	events.ModelsChanged:            false,
	events.RateLimitExceeded:        false,
	events.LLMRequestCompleted:      true,
}

// KnownEventType reports whether t is an event type Switchboard emits.
func KnownEventType(t string) bool { _, ok := eventTypes[t]; return ok }

// OptIn reports whether t is delivered only to webhooks listing it explicitly.
func OptIn(t string) bool { return eventTypes[t] }

// Webhook is a subscriber's endpoint configuration. Its secret is never
// part of it: it lives sealed in the vault.
type Webhook struct {
	// ID identifies the webhook ("wh_..."), sorting by creation time.
	ID string `json:"id"`
	// URL is the absolute http(s) endpoint deliveries are POSTed to.
	URL string `json:"url"`
	// Events lists subscribed event types, or "*" for all but the opt-in ones.
	Events []string `json:"events"`
	// Description is a human note.
	Description string `json:"description,omitempty"`
	// Enabled webhooks receive events; disabled ones keep their pending
	// deliveries paused and get no new ones.
	Enabled bool `json:"enabled"`
	// CreatedAt and UpdatedAt are UTC.
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Version starts at 1 and increments on every change of the config
	// (the ETag); delivery status fields (FailingSince) do not change it.
	Version int64 `json:"version"`
	// DisabledReason and DisabledAt say why and when the server disabled
	// the webhook (deliveries failing continuously for webhooks.disableAfter).
	DisabledReason string     `json:"disabledReason,omitempty"`
	DisabledAt     *time.Time `json:"disabledAt,omitempty"`
	// FailingSince is when deliveries started failing without a success since.
	FailingSince *time.Time `json:"failingSince,omitempty"`
	// PreviousSecretExpiresAt is when a rotated-out secret stops signing.
	PreviousSecretExpiresAt *time.Time `json:"previousSecretExpiresAt,omitempty"`
}

// Event is something that happened, as stored, listed and delivered.
type Event struct {
	// ID identifies the event ("evt_..."), sorting by creation time; it is
	// the webhook-id of every delivery of the event.
	ID string `json:"id"`
	// Type is one of the known event types.
	Type string `json:"type"`
	// CreatedAt is when the change happened (UTC, millisecond precision).
	CreatedAt time.Time `json:"createdAt"`
	// Data is the resource as the API returns it (never a secret).
	Data json.RawMessage `json:"data"`
}

// Delivery is the delivery of one event to one webhook.
type Delivery struct {
	// ID identifies the delivery within its webhook ("dlv_" + the hex part
	// of the event id).
	ID string `json:"id"`
	// WebhookID is the receiving webhook.
	WebhookID string `json:"webhookId"`
	// EventID is the delivered event, also the webhook-id header.
	EventID string `json:"eventId"`
	// EventType is the event's type.
	EventType string `json:"eventType"`
	// Status is pending, succeeded or failed.
	Status string `json:"status"`
	// Attempts counts every attempt made, including manual retries.
	Attempts int `json:"attempts"`
	// CreatedAt is when the event was recorded (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// NextAttemptAt is when the next attempt is due (pending only); a
	// delivery also waits for the earlier pending deliveries of its webhook.
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	// LastAttemptAt is when the last attempt started.
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	// LastResponseCode is the HTTP status of the last attempt (0: none).
	LastResponseCode int `json:"lastResponseCode,omitempty"`
	// LastError says why the last attempt failed; never a secret.
	LastError string `json:"lastError,omitempty"`
	// LastDurationMs is how long the last attempt took.
	LastDurationMs int64 `json:"lastDurationMs,omitempty"`

	// RunStartedAt and RunAttempts track the current retry run (from
	// creation or the last manual retry) against the retry schedule.
	RunStartedAt time.Time `json:"runStartedAt"`
	RunAttempts  int       `json:"runAttempts"`
}

// Options configure a Service.
type Options struct {
	// Store holds events, webhooks, deliveries and the outbox.
	Store store.Store
	// Vault seals webhook secrets.
	Vault *vault.Vault
	// Config is the webhooks: section; unset values take their defaults.
	Config config.Webhooks
	// Guard checks and dials webhook URLs; a guard allowing no special
	// range when nil.
	Guard *egress.Guard
	// Log receives the worker's errors; slog.Default when nil.
	Log *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Leases coordinate delivery with the other replicas sharing Store: a
	// webhook's deliveries are attempted only by the replica holding its
	// lane's lease, and pruning only by the one holding the prune job's.
	// A Manager with an owner of its own (and Now) when nil.
	Leases *lease.Manager
	// LeaseTTL is how long a lane's lease lasts unless renewed: how long
	// the webhooks of a replica that died wait before another replica
	// takes them over (default 2×webhooks.attemptTimeout + 10s; it must
	// exceed attemptTimeout).
	LeaseTTL time.Duration
	// Poll is how often the worker checks the store for work enqueued or
	// changed by other replicas (default 500ms); every ten polls it also
	// rescans the outbox for lanes whose lease expired.
	Poll time.Duration
}

// Service manages webhooks, records events and runs the delivery worker.
type Service struct {
	store  store.Store
	vault  *vault.Vault
	cfg    config.Webhooks
	guard  *egress.Guard
	log    *slog.Logger
	nowFn  func() time.Time
	client *http.Client
	// deadline bounds a delivery's retry run: the whole schedule plus
	// slack for jitter.
	deadline time.Duration
	worker   *worker
	leases   *lease.Manager
	leaseTTL time.Duration
	poll     time.Duration

	mu   sync.Mutex
	subs subIndex
	// listening caches which event types have a subscriber (Subscribed).
	listening atomic.Pointer[listeningIndex]
}

var _ events.Recorder = (*Service)(nil)

// New returns a Service; Start runs its worker.
func New(o Options) *Service {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Guard == nil {
		o.Guard, _ = egress.New(nil) // cannot fail without ranges
	}
	s := &Service{
		store: o.Store, vault: o.Vault, cfg: o.Config.WithDefaults(), guard: o.Guard,
		log: o.Log, nowFn: o.Now, subs: subIndex{rev: "\x00unloaded"},
	}
	for _, d := range s.cfg.RetrySchedule {
		s.deadline += d.D()
	}
	s.deadline += s.deadline / 4
	// Redirects are not followed: a POST would turn into a GET on a
	// 301/302, and a receiver should be configured with its final URL.
	c := *o.Guard.Client(s.cfg.AttemptTimeout.D())
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s.client = &c
	s.leases, s.leaseTTL, s.poll = o.Leases, o.LeaseTTL, o.Poll
	if s.leases == nil {
		s.leases = lease.New(o.Store, lease.Options{Now: o.Now})
	}
	if s.leaseTTL <= 0 {
		s.leaseTTL = 2*s.cfg.AttemptTimeout.D() + 10*time.Second
	}
	if s.poll <= 0 {
		s.poll = 500 * time.Millisecond
	}
	s.worker = newWorker(s)
	return s
}

func (s *Service) now() time.Time {
	if s.nowFn != nil {
		return s.nowFn().UTC()
	}
	return time.Now().UTC()
}

func secretRef(id string) string   { return "webhook/" + id + "/secret" }
func previousRef(id string) string { return "webhook/" + id + "/previous" }
func secretPrefix(id string) string {
	return "webhook/" + id + "/"
}
