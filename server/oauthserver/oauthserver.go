// Package oauthserver lets Switchboard act as an OAuth 2.0 authorization
// server for its own callers: admins register OAuth clients, clients
// exchange their credentials for short-lived JWT access tokens with the
// client-credentials grant (RFC 6749 §4.4), and the Service authenticates
// those tokens (and, optionally, JWTs of configured external issuers) as an
// auth.Authenticator beside API keys.
//
// Access tokens follow the JWT profile for OAuth 2.0 access tokens (RFC
// 9068: header typ "at+jwt"; claims iss, sub, aud, exp, iat, nbf, jti,
// client_id, scope), signed with Ed25519 (EdDSA). The signing key is sealed
// by the vault; rotation keeps the previous key published at
// /.well-known/jwks.json until every token it signed has expired.
package oauthserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// Options are what New needs; Store and Vault are required.
type Options struct {
	Store store.Store
	Vault *vault.Vault
	// Config supplies the issuer, audience, token lifetime and external issuers.
	Config config.Config
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// HTTPClient fetches external issuers' JWKS (a 10 s timeout client when nil).
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Service issues and verifies access tokens and manages OAuth clients.
type Service struct {
	store    store.Store
	vault    *vault.Vault
	now      func() time.Time
	log      *slog.Logger
	issuer   string
	audience string
	ttl      time.Duration
	leeway   time.Duration

	clients clientIndex
	keys    keyState
	cache   tokenCache
	// external maps an `iss` to the issuer configured for it.
	external map[string]*externalIssuer
}

var _ auth.Authenticator = (*Service)(nil)

// New loads the signing keys (creating the first key on a new
// database) and returns the service.
func New(ctx context.Context, o Options) (*Service, error) {
	if o.Store == nil || o.Vault == nil {
		return nil, fmt.Errorf("oauthserver: Store and Vault are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	oc := o.Config.OAuth.WithDefaults()
	s := &Service{
		store:    o.Store,
		vault:    o.Vault,
		now:      o.Now,
		log:      o.Logger,
		issuer:   o.Config.TokenIssuer(),
		audience: o.Config.TokenAudience(),
		ttl:      oc.TokenTTL.D(),
		leeway:   oc.Leeway.D(),
		external: map[string]*externalIssuer{},
	}
	s.cache.init(defaultCacheSize)
	for _, x := range oc.ExternalIssuers {
		s.external[x.Issuer] = newExternalIssuer(x, o.HTTPClient, o.Now)
	}
	if err := s.initKeys(ctx); err != nil {
		return nil, fmt.Errorf("oauthserver: signing keys: %w", err)
	}
	return s, nil
}

// Issuer is the `iss` of the tokens this service issues.
func (s *Service) Issuer() string { return s.issuer }

// Audience is the `aud` of the tokens this service issues.
func (s *Service) Audience() string { return s.audience }

// TokenTTL is the lifetime of issued tokens.
func (s *Service) TokenTTL() time.Duration { return s.ttl }
