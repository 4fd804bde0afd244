package config

import (
	"fmt"
	"net/url"
	"time"
)

// OAuth configures the access tokens Switchboard issues to OAuth clients
// (POST /v1/oauth/token) and the external issuers whose tokens it accepts.
type OAuth struct {
	// Issuer is the `iss` of issued tokens; publicUrl when empty, else "switchboard".
	Issuer string `yaml:"issuer"`
	// Audience is the `aud` of issued tokens and the audience they must
	// carry to be accepted; the issuer when empty.
	Audience string `yaml:"audience"`
	// TokenTTL is the lifetime of issued access tokens (default 15m, at most 24h).
	TokenTTL Duration `yaml:"tokenTtl"`
	// Leeway is the clock skew tolerated on exp/nbf/iat (default 30s).
	Leeway Duration `yaml:"leeway"`
	// ExternalIssuers are other authorization servers whose JWT access
	// tokens are accepted, checked against their published JWKS.
	ExternalIssuers []ExternalIssuer `yaml:"externalIssuers"`
}

// ExternalIssuer is an authorization server whose JWTs are accepted.
type ExternalIssuer struct {
	// Name is a short label used in principal ids ("ext:<name>:<sub>");
	// the issuer's host when empty.
	Name string `yaml:"name"`
	// Issuer is the exact `iss` claim the tokens carry.
	Issuer string `yaml:"issuer"`
	// Audience is the `aud` the tokens must contain.
	Audience string `yaml:"audience"`
	// JWKSURL is where the issuer publishes its signing keys.
	JWKSURL string `yaml:"jwksUrl"`
	// ScopesClaim names the claim carrying scopes, a space-separated string
	// or an array of strings (default "scope").
	ScopesClaim string `yaml:"scopesClaim"`
	// RefreshInterval is how often the JWKS is refetched (default 15m); an
	// unknown key id triggers a refetch sooner (at most every MinRefreshInterval).
	RefreshInterval Duration `yaml:"refreshInterval"`
	// MinRefreshInterval spaces refetches caused by unknown key ids (default 10s).
	MinRefreshInterval Duration `yaml:"minRefreshInterval"`
	// RateLimit overrides limits.requestsPerMinute/tokensPerMinute for each
	// subject of this issuer.
	RateLimit *RateLimit `yaml:"rateLimit"`
}

// RateLimit overrides the default per-credential limits; zero keeps the default.
type RateLimit struct {
	RequestsPerMinute int `yaml:"requestsPerMinute"`
	TokensPerMinute   int `yaml:"tokensPerMinute"`
}

// Metrics configures GET /metrics.
type Metrics struct {
	// RequireScope, when set (e.g. "admin"), makes /metrics need a bearer
	// credential carrying that scope; /metrics is public when empty.
	RequireScope string `yaml:"requireScope"`
}

// Defaults of the OAuth settings.
const (
	DefaultTokenTTL           = 15 * time.Minute
	MaxTokenTTL               = 24 * time.Hour
	DefaultLeeway             = 30 * time.Second
	DefaultJWKSRefresh        = 15 * time.Minute
	DefaultJWKSMinRefresh     = 10 * time.Second
	DefaultExternalScopeClaim = "scope"
)

// WithDefaults returns o with unset values filled in; consumers call it so
// that a Config built in code (tests) behaves like one loaded from a file.
func (o OAuth) WithDefaults() OAuth {
	if o.TokenTTL == 0 {
		o.TokenTTL = Duration(DefaultTokenTTL)
	}
	if o.Leeway == 0 {
		o.Leeway = Duration(DefaultLeeway)
	}
	xs := make([]ExternalIssuer, len(o.ExternalIssuers))
	for i, x := range o.ExternalIssuers {
		xs[i] = x.WithDefaults()
	}
	o.ExternalIssuers = xs
	return o
}

// WithDefaults returns x with unset values filled in.
func (x ExternalIssuer) WithDefaults() ExternalIssuer {
	if x.ScopesClaim == "" {
		x.ScopesClaim = DefaultExternalScopeClaim
	}
	if x.RefreshInterval == 0 {
		x.RefreshInterval = Duration(DefaultJWKSRefresh)
	}
	if x.MinRefreshInterval == 0 {
		x.MinRefreshInterval = Duration(DefaultJWKSMinRefresh)
	}
	if x.Name == "" {
		if u, err := url.Parse(x.Issuer); err == nil && u.Host != "" {
			x.Name = u.Host
		} else {
			x.Name = x.Issuer
		}
	}
	return x
}

// TokenIssuer is the `iss` of the tokens this server issues.
func (c Config) TokenIssuer() string {
	switch {
	case c.OAuth.Issuer != "":
		return c.OAuth.Issuer
	case c.PublicURL != "":
		return c.PublicURL
	}
	return "switchboard"
}

// TokenAudience is the `aud` of the tokens this server issues and accepts.
func (c Config) TokenAudience() string {
	if c.OAuth.Audience != "" {
		return c.OAuth.Audience
	}
	return c.TokenIssuer()
}

// validateOAuth lists problems of the oauth, metrics and rate-limit settings.
func (c Config) validateOAuth() []string {
	var ps []string
	if ttl := c.OAuth.TokenTTL.D(); ttl < 0 || ttl > MaxTokenTTL {
		ps = append(ps, fmt.Sprintf("oauth.tokenTtl must be between 1s and %s", MaxTokenTTL))
	} else if ttl != 0 && ttl < time.Second {
		ps = append(ps, "oauth.tokenTtl must be at least 1s")
	}
	if c.OAuth.Leeway.D() < 0 || c.OAuth.Leeway.D() > 5*time.Minute {
		ps = append(ps, "oauth.leeway must be between 0 and 5m")
	}
	if c.Limits.RequestsPerMinute < 0 {
		ps = append(ps, "limits.requestsPerMinute must not be negative (0 turns the limit off)")
	}
	if c.Limits.TokensPerMinute < 0 {
		ps = append(ps, "limits.tokensPerMinute must not be negative (0 turns the limit off)")
	}
	if c.Limits.ControlPlaneRequestsPerMinute < 0 {
		ps = append(ps, "limits.controlPlaneRequestsPerMinute must not be negative (0 turns the limit off)")
	}
	seen := map[string]bool{}
	for i, x := range c.OAuth.ExternalIssuers {
		at := fmt.Sprintf("oauth.externalIssuers[%d]", i)
		if x.Issuer == "" {
			ps = append(ps, at+".issuer is required")
		} else if x.Issuer == c.TokenIssuer() {
			ps = append(ps, at+".issuer must differ from this server's own issuer "+c.TokenIssuer())
		}
		if seen[x.Issuer] {
			ps = append(ps, at+".issuer "+x.Issuer+" is listed twice")
		}
		seen[x.Issuer] = true
		if x.Audience == "" {
			ps = append(ps, at+".audience is required")
		}
		if u, err := url.Parse(x.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			ps = append(ps, at+".jwksUrl must be an absolute http(s) URL")
		}
		if x.RateLimit != nil && (x.RateLimit.RequestsPerMinute < 0 || x.RateLimit.TokensPerMinute < 0) {
			ps = append(ps, at+".rateLimit values must not be negative")
		}
	}
	return ps
}
