package config

import (
	"strings"
	"testing"
	"time"
)

func TestOAuthValidation(t *testing.T) {
	ok := ExternalIssuer{Issuer: "https://idp.example/", Audience: "sb", JWKSURL: "https://idp.example/jwks"}
	tests := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"external issuer", func(c *Config) { c.OAuth.ExternalIssuers = []ExternalIssuer{ok} }, ""},
		{"ttl too long", func(c *Config) { c.OAuth.TokenTTL = Duration(48 * time.Hour) }, "oauth.tokenTtl"},
		{"ttl below a second", func(c *Config) { c.OAuth.TokenTTL = Duration(time.Millisecond) }, "oauth.tokenTtl"},
		{"negative leeway", func(c *Config) { c.OAuth.Leeway = Duration(-time.Second) }, "oauth.leeway"},
		{"negative rpm", func(c *Config) { c.Limits.RequestsPerMinute = -1 }, "limits.requestsPerMinute"},
		{"negative control-plane rpm", func(c *Config) { c.Limits.ControlPlaneRequestsPerMinute = -1 }, "limits.controlPlaneRequestsPerMinute"},
		{"issuer missing", func(c *Config) { c.OAuth.ExternalIssuers = []ExternalIssuer{{Audience: "a", JWKSURL: ok.JWKSURL}} }, "externalIssuers[0].issuer is required"},
		{"own issuer", func(c *Config) {
			x := ok
			x.Issuer = "switchboard"
			c.OAuth.ExternalIssuers = []ExternalIssuer{x}
		}, "must differ"},
		{"twice", func(c *Config) { c.OAuth.ExternalIssuers = []ExternalIssuer{ok, ok} }, "listed twice"},
		{"no audience", func(c *Config) {
			x := ok
			x.Audience = ""
			c.OAuth.ExternalIssuers = []ExternalIssuer{x}
		}, "audience is required"},
		{"relative jwks", func(c *Config) {
			x := ok
			x.JWKSURL = "/jwks"
			c.OAuth.ExternalIssuers = []ExternalIssuer{x}
		}, "jwksUrl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.mod(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestOAuthDefaultsAndIssuer(t *testing.T) {
	c := Default()
	if c.TokenIssuer() != "switchboard" || c.TokenAudience() != "switchboard" {
		t.Errorf("issuer %q audience %q", c.TokenIssuer(), c.TokenAudience())
	}
	c.PublicURL = "https://sb.example"
	if c.TokenIssuer() != "https://sb.example" || c.TokenAudience() != "https://sb.example" {
		t.Errorf("issuer %q audience %q, want the public URL", c.TokenIssuer(), c.TokenAudience())
	}
	c.OAuth.Audience = "api"
	if c.TokenAudience() != "api" {
		t.Errorf("audience %q", c.TokenAudience())
	}
	o := OAuth{ExternalIssuers: []ExternalIssuer{{Issuer: "https://idp.example/tenant"}}}.WithDefaults()
	x := o.ExternalIssuers[0]
	if o.TokenTTL.D() != DefaultTokenTTL || x.Name != "idp.example" || x.ScopesClaim != "scope" ||
		x.RefreshInterval.D() != DefaultJWKSRefresh || x.MinRefreshInterval.D() != DefaultJWKSMinRefresh {
		t.Errorf("defaults = %+v %+v", o, x)
	}
}
