// Package auth authenticates callers of the API and carries who they are,
// with their scopes, through the request context.
package auth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// The scopes a credential can carry. Admin implies every other scope.
const (
	ScopeAdmin           = "admin"
	ScopeConnectorsRead  = "connectors:read"
	ScopeConnectorsWrite = "connectors:write"
	ScopeInvoke          = "invoke"
	ScopeLLM             = "llm"
	ScopeWebhooksWrite   = "webhooks:write"
)

// Scopes lists every known scope.
var Scopes = []string{ScopeAdmin, ScopeConnectorsRead, ScopeConnectorsWrite, ScopeInvoke, ScopeLLM, ScopeWebhooksWrite}

// ValidScope reports whether s is a known scope.
func ValidScope(s string) bool { return slices.Contains(Scopes, s) }

// Principal is an authenticated caller.
type Principal struct {
	// ID identifies the credential (API key id, OAuth client id, token subject).
	ID string
	// Kind is the credential kind: "api_key" or "oauth_token".
	Kind string
	// Name is the credential's human name.
	Name string
	// Scopes the credential grants.
	Scopes []string
	// CreatedAt is when the credential was created (the start of a total
	// budget); zero when unknown.
	CreatedAt time.Time
	// Policy limits what the credential may use and spend (its RateLimit
	// overrides config.Limits; nil or zero fields keep the default).
	Policy
	// Connection is the connection the credential is bound to: its tool
	// calls use only that one. Empty when unbound.
	Connection string
}

// RateLimit is a per-credential override of the requests-per-minute and
// tokens-per-minute limits; a zero field keeps the configured default.
type RateLimit struct {
	RequestsPerMinute int `json:"requestsPerMinute,omitempty"`
	TokensPerMinute   int `json:"tokensPerMinute,omitempty"`
}

// KindOAuthToken is the Principal.Kind of callers using an OAuth access token.
const KindOAuthToken = "oauth_token"

// Has reports whether p grants scope (admin grants all).
func (p *Principal) Has(scope string) bool {
	return p != nil && (slices.Contains(p.Scopes, ScopeAdmin) || slices.Contains(p.Scopes, scope))
}

// Require returns errs.Forbidden unless p grants every scope in scopes.
func (p *Principal) Require(scopes ...string) error {
	if p == nil {
		return errs.E(errs.Unauthenticated, "authentication required")
	}
	var missing []string
	for _, s := range scopes {
		if !p.Has(s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return errs.E(errs.Forbidden, "credential lacks scope %s", strings.Join(missing, ", ")).
			WithDetails(map[string]any{"requiredScopes": missing})
	}
	return nil
}

// Authenticator turns a bearer credential into a Principal. It returns an
// error of kind errs.Unauthenticated for a credential it recognises but
// refuses, and ErrNotMine for one it does not handle.
type Authenticator interface {
	Authenticate(ctx context.Context, credential string) (*Principal, error)
}

// ErrNotMine tells the chain to try the next authenticator.
var ErrNotMine = errs.E(errs.Unauthenticated, "unrecognised credential")

// Chain tries each authenticator in turn: the first one that does not
// answer ErrNotMine decides. A new credential kind (OAuth access tokens)
// plugs in by appending its Authenticator.
type Chain []Authenticator

var _ Authenticator = Chain(nil)

// Authenticate implements Authenticator.
func (c Chain) Authenticate(ctx context.Context, credential string) (*Principal, error) {
	for _, a := range c {
		p, err := a.Authenticate(ctx, credential)
		if errors.Is(err, ErrNotMine) {
			continue
		}
		return p, err
	}
	return nil, errs.E(errs.Unauthenticated, "invalid credential")
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the caller, or nil when unauthenticated.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}
