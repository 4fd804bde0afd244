package connectors

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// Retargeting.
//
// A key with connectors:write cannot read a connection's credentials, so a
// replace must not let it send them somewhere new. When a replace changes
// where or how stored credentials are sent — the baseUrl's origin (scheme,
// host, port), the auth type, an apiKey's in, name or prefix, an oauth2
// tokenUrl — the credentials stored for the old target are dropped in the
// same transaction and every connection of the connector becomes
// reauth_required until its credentials are supplied again (PUT of the
// connection, or /connect for authorization_code). An oauth2 client secret
// is only ever sent to the token endpoint it was given for: a replace that
// moves the tokenUrl (or, for client_credentials, the baseUrl's origin) must
// carry clientSecret again.

// egressCheckTimeout bounds the name lookup of a baseUrl's host at save time.
const egressCheckTimeout = 2 * time.Second

// origin is a URL's scheme, lower-case host and port (the scheme's default
// when none is given); "" when raw does not parse.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// apiKeyName is an apiKey's carrier as it reaches the upstream: header
// names are case-insensitive, query and cookie names are not.
func apiKeyName(a Auth) string {
	if a.In == InHeader {
		return httpCanonical(a.Name)
	}
	return a.Name
}

// credentialsMoved says why the stored credentials of a connector's
// connections would be sent somewhere new, or in a new way, if c replaced
// old; "" when they would not.
func credentialsMoved(old, c Connector) string {
	switch {
	case origin(old.BaseURL) != origin(c.BaseURL):
		return "baseUrl moved from " + origin(old.BaseURL) + " to " + origin(c.BaseURL)
	case old.Auth.Type != c.Auth.Type:
		return "auth.type changed from " + old.Auth.Type + " to " + c.Auth.Type
	}
	a, b := old.Auth, c.Auth
	switch a.Type {
	case AuthAPIKey:
		switch {
		case a.In != b.In:
			return "the API key moved from the " + a.In + " to the " + b.In
		case apiKeyName(a) != apiKeyName(b):
			return "the API key moved from " + placementNoun(a.In) + " " + a.Name + " to " + b.Name
		case a.Prefix != b.Prefix:
			return "auth.prefix changed"
		}
	case AuthOAuth2:
		if a.TokenURL != b.TokenURL {
			return "auth.tokenUrl changed"
		}
	}
	return ""
}

// secretMoveProblems refuses a replace that would send the stored oauth2
// client secret, or the tokens fetched with it, to a new place without the
// secret being given again.
func secretMoveProblems(old, c Connector) []errs.Problem {
	if old.Auth.Type != AuthOAuth2 || c.Auth.Type != AuthOAuth2 || !old.Auth.HasClientSecret || c.Auth.ClientSecret != "" {
		return nil
	}
	var ps problems
	switch {
	case old.Auth.TokenURL != c.Auth.TokenURL:
		ps.add("auth.clientSecret", "tokenUrl changed: send clientSecret again (the stored client secret is only sent to the token endpoint it was given for)")
	case c.Auth.Grant == GrantClientCredentials && origin(old.BaseURL) != origin(c.BaseURL):
		ps.add("auth.clientSecret", "baseUrl moved to another origin (%s): send clientSecret again (the tokens fetched with the stored client secret are only sent to the origin it was given for)", origin(c.BaseURL))
	}
	return ps
}

// egressProblems checks that the egress guard would let a request to
// baseUrl through: an IP literal host must be allowed; a host name is
// refused when every address it resolves to is (a name that does not
// resolve now is accepted: it is checked again when dialled).
func (s *Service) egressProblems(ctx context.Context, c Connector) []errs.Problem {
	if s.Guard == nil {
		return nil
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, egressCheckTimeout)
	defer cancel()
	denied := s.Guard.CheckHost(ctx, u.Hostname())
	if denied == nil {
		return nil
	}
	msg := denied.Error()
	if e, ok := denied.(*errs.Error); ok {
		msg = e.Message
	}
	return []errs.Problem{{Field: "baseUrl", Problem: msg + "; actions of this connector could never run"}}
}
