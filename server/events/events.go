// Package events names the events Switchboard emits and the Recorder that
// writes them, in the same transaction as the change that caused them.
package events

import "github.com/switchboard-dev/terraform-provider-switchboard/server/store"

// Event types.
const (
	ConnectorCreated         = "connector.created"
	ConnectorUpdated         = "connector.updated"
	ConnectorDeleted         = "connector.deleted"
	ActionCreated            = "action.created"
	ActionUpdated            = "action.updated"
	ActionDeleted            = "action.deleted"
	ActionInvoked            = "action.invoked"
	ActionFailed             = "action.failed"
	ConnectionCreated        = "connection.created"
	ConnectionUpdated        = "connection.updated"
	ConnectionDeleted        = "connection.deleted"
	ConnectionReauthRequired = "connection.reauth_required"
	APIKeyCreated            = "api_key.created"
	APIKeyRevoked            = "api_key.revoked"
	APIKeyUpdated            = "api_key.updated"
	WebhookTest              = "webhook.test"
	ToolsetCreated           = "toolset.created"
	ToolsetUpdated           = "toolset.updated"
	ToolsetDeleted           = "toolset.deleted"

	// Model-service events.
	BudgetAlert         = "usage.budget_alert"
	BudgetExhausted     = "usage.budget_exhausted"
	FallbackUsed        = "llm.fallback_used"
	ProviderUnhealthy   = "llm.provider_unhealthy"
	ProviderRecovered   = "llm.provider_recovered"
	ModelsChanged       = "llm.models_changed"
	RateLimitExceeded   = "ratelimit.exceeded"
	LLMRequestCompleted = "llm.request.completed"
)

// Recorder records an event inside the caller's write transaction. data is
// the resource as the API returns it and must not hold a secret.
type Recorder interface {
	Record(tx store.Tx, eventType string, data any) error
}

// Nop records nothing.
type Nop struct{}

// Record implements Recorder.
func (Nop) Record(store.Tx, string, any) error { return nil }
