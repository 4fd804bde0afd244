package connectors

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Limits on the OAuth 2.0 extras of a connector.
const (
	// MaxOAuthParams bounds authorizationParams and tokenParams, each.
	MaxOAuthParams = 20
	// MaxOAuthParamValueBytes bounds one extra parameter's value.
	MaxOAuthParamValueBytes = 1024
	// MaxRedirectURLs bounds redirectUrls.
	MaxRedirectURLs = 20
)

// OAuth 2.0 client authentication at the token endpoint (Auth.ClientAuth).
const (
	ClientAuthBasic = "basic"
	ClientAuthBody  = "body"
)

// ClientAuths lists the known values of Auth.ClientAuth.
var ClientAuths = []string{ClientAuthBasic, ClientAuthBody}

// reservedAuthorizationParams are set by the server on the authorization
// URL; an extra parameter may not replace them.
var reservedAuthorizationParams = []string{
	"response_type", "client_id", "redirect_uri", "scope", "state",
	"code_challenge", "code_challenge_method",
}

// reservedTokenParams are set by the server on token requests.
var reservedTokenParams = []string{
	"grant_type", "code", "redirect_uri", "code_verifier", "client_id",
	"client_secret", "refresh_token", "scope",
}

// validateOAuthExtras checks the OAuth 2.0 fields beyond the endpoints and
// the client: extra parameters, client authentication, redirect list.
func validateOAuthExtras(ps *problems, a Auth, notFor func(field string, set bool, typ string)) {
	notFor("authorizationParams", len(a.AuthorizationParams) > 0, AuthOAuth2)
	notFor("tokenParams", len(a.TokenParams) > 0, AuthOAuth2)
	notFor("clientAuth", a.ClientAuth != "", AuthOAuth2)
	if len(a.RedirectURLs) > 0 && a.Type == AuthNone {
		ps.add("auth.redirectUrls", "does not apply to auth type none: its connections take no credentials")
	}
	checkRedirectURLs(ps, a.RedirectURLs)
	if a.Type != AuthOAuth2 {
		return
	}
	if a.ClientAuth != "" && !slices.Contains(ClientAuths, a.ClientAuth) {
		ps.add("auth.clientAuth", "unknown client authentication %q; one of %s", a.ClientAuth, oneOf(ClientAuths))
	}
	if a.Grant == GrantClientCredentials {
		if len(a.AuthorizationParams) > 0 {
			ps.add("auth.authorizationParams", "applies only to grant %s", GrantAuthorizationCode)
		}
		if len(a.RedirectURLs) > 0 {
			ps.add("auth.redirectUrls", "applies only to grant %s", GrantAuthorizationCode)
		}
	}
	checkOAuthParams(ps, "auth.authorizationParams", a.AuthorizationParams, reservedAuthorizationParams)
	checkOAuthParams(ps, "auth.tokenParams", a.TokenParams, reservedTokenParams)
}

// checkRedirectURLs checks the URLs a browser may be sent back to after
// connecting (the connect flow's redirect, a connect session's
// redirectUrl).
func checkRedirectURLs(ps *problems, urls []string) {
	if len(urls) > MaxRedirectURLs {
		ps.add("auth.redirectUrls", "must list at most %d URLs, got %d", MaxRedirectURLs, len(urls))
	}
	for i, u := range urls {
		field := "auth.redirectUrls[" + strconv.Itoa(i) + "]"
		if slices.Contains(urls[:i], u) {
			ps.add(field, "duplicate URL %q", u)
			continue
		}
		checkURL(ps, field, u, false)
	}
}

func checkOAuthParams(ps *problems, field string, params map[string]string, reserved []string) {
	if len(params) > MaxOAuthParams {
		ps.add(field, "must hold at most %d parameters, got %d", MaxOAuthParams, len(params))
		return
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f := field + "." + k
		v := params[k]
		switch {
		case k == "" || len(k) > 64 || !validToken(k):
			ps.add(field, "parameter name %q must be 1-64 characters of letters, digits and !#$%%&'*+-.^_`|~", k)
		case slices.Contains(reserved, k):
			ps.add(f, "is set by the server and cannot be overridden (reserved: %s)", strings.Join(reserved, ", "))
		case len(v) > MaxOAuthParamValueBytes:
			ps.add(f, "must be at most %d bytes, got %d", MaxOAuthParamValueBytes, len(v))
		case strings.ContainsFunc(v, unicode.IsControl):
			ps.add(f, "must not contain control characters")
		}
	}
}
