package oauthserver

import (
	"context"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ids"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/metrics"
)

// The error codes of RFC 6749 §5.2 (token endpoint).
const (
	InvalidRequest       = "invalid_request"
	InvalidClient        = "invalid_client"
	InvalidGrant         = "invalid_grant"
	UnauthorizedClient   = "unauthorized_client"
	UnsupportedGrantType = "unsupported_grant_type"
	InvalidScope         = "invalid_scope"
	// ServerError is not in §5.2 but is what servers send on a 500.
	ServerError = "server_error"
)

// GrantClientCredentials is the only grant type supported.
const GrantClientCredentials = "client_credentials"

// detailKey carries the RFC 6749 code in an *errs.Error's Details.
const detailKey = "oauthError"

// tokenError is an RFC 6749 error as an *errs.Error: invalid_client is a
// 401, the others 400.
func tokenError(code, msg string) *errs.Error {
	kind := errs.Invalid
	if code == InvalidClient {
		kind = errs.Unauthenticated
	}
	return errs.E(kind, "%s", msg).WithDetails(map[string]any{detailKey: code})
}

// ErrorCode returns the RFC 6749 error code for e, derived from its kind
// when the token endpoint did not set one (a body over the limit, a panic).
func ErrorCode(e *errs.Error) string {
	if c, ok := e.Details[detailKey].(string); ok {
		return c
	}
	switch e.Kind.Status() / 100 {
	case 4:
		if e.Kind == errs.Unauthenticated {
			return InvalidClient
		}
		return InvalidRequest
	}
	return ServerError
}

// TokenRequest is a token request (RFC 6749 §4.4.2): the form parameters
// and the Authorization header.
type TokenRequest struct {
	GrantType string
	// Scope is nil when the parameter is absent.
	Scope        *string
	ClientID     string
	ClientSecret string
	// Authorization is the Authorization header, if any.
	Authorization string
}

// CheckForm refuses a token request form with a repeated parameter
// (RFC 6749 §3.2: parameters must not be included more than once).
func CheckForm(form url.Values) error {
	for name, vs := range form {
		if len(vs) > 1 {
			return tokenError(InvalidRequest, "parameter "+quoteShort(name)+" is repeated; each parameter may appear once")
		}
	}
	return nil
}

// Token is a successful token response (RFC 6749 §5.1).
type Token struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
}

// accessClaims are the claims of an access token (RFC 9068).
type accessClaims struct {
	jwt.Claims
	ClientID string `json:"client_id,omitempty"`
	Scope    string `json:"scope,omitempty"`
}

// IssueToken runs the client-credentials grant. Every failure is an
// *errs.Error whose ErrorCode is the RFC 6749 error to send.
func (s *Service) IssueToken(ctx context.Context, req TokenRequest) (Token, error) {
	t, err := s.issueToken(ctx, req)
	outcome := metrics.OutcomeSuccess
	if err != nil {
		outcome = ServerError
		if e, ok := err.(*errs.Error); ok {
			outcome = ErrorCode(e)
		}
	}
	metrics.TokenIssued(outcome)
	return t, err
}

func (s *Service) issueToken(ctx context.Context, req TokenRequest) (Token, error) {
	id, secret, err := clientCredentials(req)
	if err != nil {
		return Token{}, err
	}
	switch gt := req.GrantType; gt {
	case GrantClientCredentials:
	case "":
		return Token{}, tokenError(InvalidRequest, "grant_type is required (client_credentials)")
	default:
		return Token{}, tokenError(UnsupportedGrantType, "grant_type "+quoteShort(gt)+" is not supported; use client_credentials")
	}
	c, err := s.authenticateClient(ctx, id, secret)
	if err != nil {
		return Token{}, err
	}
	scopes := c.Scopes
	if req.Scope != nil {
		scopes = nil
		for _, sc := range strings.Fields(*req.Scope) {
			switch {
			case !auth.ValidScope(sc):
				return Token{}, tokenError(InvalidScope, "unknown scope "+quoteShort(sc)+"; known: "+strings.Join(auth.Scopes, " "))
			case !slices.Contains(c.Scopes, sc):
				return Token{}, tokenError(InvalidScope, "scope "+sc+" is not granted to this client; it may request: "+strings.Join(c.Scopes, " "))
			case !slices.Contains(scopes, sc):
				scopes = append(scopes, sc)
			}
		}
		if len(scopes) == 0 {
			return Token{}, tokenError(InvalidScope, "scope is empty; omit it to receive every scope of the client")
		}
	}
	raw, err := s.sign(c, scopes)
	if err != nil {
		return Token{}, err
	}
	return Token{AccessToken: raw, TokenType: "Bearer", ExpiresIn: int64(s.ttl.Seconds()), Scope: strings.Join(scopes, " ")}, nil
}

// sign issues an access token for c with scopes.
func (s *Service) sign(c Client, scopes []string) (string, error) {
	r := s.ring()
	now := s.now()
	claims := accessClaims{
		Claims: jwt.Claims{
			Issuer:    s.issuer,
			Subject:   c.ID,
			Audience:  jwt.Audience{s.audience},
			Expiry:    jwt.NewNumericDate(now.Add(s.ttl)),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        ids.New("at_", now),
		},
		ClientID: c.ID,
		Scope:    strings.Join(scopes, " "),
	}
	raw, err := jwt.Signed(r.signer).Claims(claims).Serialize()
	if err != nil {
		return "", errs.Wrap(errs.Internal, err, "signing the access token failed")
	}
	return raw, nil
}

// clientCredentials extracts the client id and secret from the Basic
// header or the form (RFC 6749 §2.3.1), refusing requests that use both.
func clientCredentials(req TokenRequest) (id, secret string, err error) {
	formID, formSecret := req.ClientID, req.ClientSecret
	if req.Authorization != "" {
		scheme, cred, _ := strings.Cut(req.Authorization, " ")
		if !strings.EqualFold(scheme, "Basic") {
			return "", "", tokenError(InvalidClient, "the Authorization header must use the Basic scheme with client_id:client_secret")
		}
		dec, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if derr != nil {
			return "", "", tokenError(InvalidClient, "the Basic credentials are not valid base64")
		}
		u, p, ok := strings.Cut(string(dec), ":")
		if !ok {
			return "", "", tokenError(InvalidClient, "the Basic credentials must be client_id:client_secret")
		}
		// Both parts are form-encoded before Basic encoding (§2.3.1).
		if id, err = url.QueryUnescape(u); err != nil {
			return "", "", tokenError(InvalidClient, "the Basic client_id is not form-encoded correctly")
		}
		if secret, err = url.QueryUnescape(p); err != nil {
			return "", "", tokenError(InvalidClient, "the Basic client_secret is not form-encoded correctly")
		}
		if formSecret != "" {
			return "", "", tokenError(InvalidRequest, "send the client credentials either in the Authorization header or in the body, not both")
		}
		if formID != "" && formID != id {
			return "", "", tokenError(InvalidRequest, "client_id in the body differs from the one in the Authorization header")
		}
		return id, secret, nil
	}
	if formID == "" || formSecret == "" {
		return "", "", tokenError(InvalidClient, "client authentication required: send client_id and client_secret with HTTP Basic or in the form body")
	}
	return formID, formSecret, nil
}

// quoteShort quotes s for a message, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return `"` + strings.Map(func(r rune) rune {
		if r < ' ' || r == '"' || r == '\\' {
			return '?'
		}
		return r
	}, s) + `"`
}
