package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthserver"
)

// tokenRoute is the OAuth token endpoint; its errors have RFC 6749's shape.
const tokenRoute = "/v1/oauth/token"

func (h *handlers) CreateOAuthClient(ctx context.Context, req api.CreateOAuthClientRequestObject) (api.CreateOAuthClientResponseObject, error) {
	b := req.Body
	in := oauthserver.NewClientInput{Name: b.Name, Policy: policyFromAPI(b.RateLimit, b.Models, b.Connectors, b.Budget)}
	for _, s := range b.Scopes {
		in.Scopes = append(in.Scopes, string(s))
	}
	c, secret, err := h.s.oauth.CreateClient(ctx, in)
	if err != nil {
		return nil, err
	}
	pub, err := h.s.oauthClientWithSpend(ctx, c)
	if err != nil {
		return nil, err
	}
	noStore := "no-store"
	return api.CreateOAuthClient201JSONResponse{
		Body: api.OAuthClientCreated{
			Id: pub.Id, Name: pub.Name, Scopes: pub.Scopes, RateLimit: pub.RateLimit, Models: pub.Models,
			Connectors: pub.Connectors, Budget: pub.Budget, Spend: pub.Spend,
			CreatedAt: pub.CreatedAt, Version: pub.Version, ClientSecret: secret,
		},
		Headers: api.CreateOAuthClient201ResponseHeaders{CacheControl: &noStore},
	}, nil
}

func (h *handlers) ListOAuthClients(ctx context.Context, req api.ListOAuthClientsRequestObject) (api.ListOAuthClientsResponseObject, error) {
	limit, err := pageLimit(req.Params.Limit)
	if err != nil {
		return nil, err
	}
	cs, next, err := h.s.oauth.ListClients(ctx, deref(req.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	out := api.ListOAuthClients200JSONResponse{Data: make([]api.OAuthClient, 0, len(cs))}
	for _, c := range cs {
		pub, err := h.s.oauthClientWithSpend(ctx, c)
		if err != nil {
			return nil, err
		}
		out.Data = append(out.Data, pub)
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

func (h *handlers) GetOAuthClient(ctx context.Context, req api.GetOAuthClientRequestObject) (api.GetOAuthClientResponseObject, error) {
	c, err := h.s.oauth.GetClient(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	pub, err := h.s.oauthClientWithSpend(ctx, c)
	if err != nil {
		return nil, err
	}
	return api.GetOAuthClient200JSONResponse{Body: pub, Headers: api.GetOAuthClient200ResponseHeaders{ETag: etag(c.Version)}}, nil
}

func (h *handlers) UpdateOAuthClient(ctx context.Context, req api.UpdateOAuthClientRequestObject) (api.UpdateOAuthClientResponseObject, error) {
	version, err := ifMatchVersion(req.Params.IfMatch, func() (int64, error) {
		c, err := h.s.oauth.GetClient(ctx, req.Id)
		return c.Version, err
	})
	if err != nil {
		return nil, err
	}
	b := req.Body
	c, err := h.s.oauth.UpdateClient(ctx, req.Id, version, oauthserver.UpdateClientInput{
		Name: b.Name, Policy: policyFromAPI(b.RateLimit, b.Models, b.Connectors, b.Budget)})
	if err != nil {
		return nil, err
	}
	pub, err := h.s.oauthClientWithSpend(ctx, c)
	if err != nil {
		return nil, err
	}
	return api.UpdateOAuthClient200JSONResponse{Body: pub, Headers: api.UpdateOAuthClient200ResponseHeaders{ETag: etag(c.Version)}}, nil
}

func (h *handlers) DeleteOAuthClient(ctx context.Context, req api.DeleteOAuthClientRequestObject) (api.DeleteOAuthClientResponseObject, error) {
	if err := h.s.oauth.DeleteClient(ctx, req.Id); err != nil {
		return nil, err
	}
	return api.DeleteOAuthClient204Response{}, nil
}

func (h *handlers) CreateOAuthToken(ctx context.Context, req api.CreateOAuthTokenRequestObject) (api.CreateOAuthTokenResponseObject, error) {
	tr := oauthserver.TokenRequest{}
	if req.Params.Authorization != nil {
		tr.Authorization = *req.Params.Authorization
	}
	if b := req.Body; b != nil {
		tr.GrantType, tr.Scope = b.GrantType, b.Scope
		if b.ClientId != nil {
			tr.ClientID = *b.ClientId
		}
		if b.ClientSecret != nil {
			tr.ClientSecret = *b.ClientSecret
		}
	}
	tok, err := h.s.oauth.IssueToken(ctx, tr)
	if err != nil {
		return nil, err
	}
	noStore, noCache := "no-store", "no-cache"
	return api.CreateOAuthToken200JSONResponse{
		Body:    api.OAuthToken{AccessToken: tok.AccessToken, TokenType: tok.TokenType, ExpiresIn: tok.ExpiresIn, Scope: tok.Scope},
		Headers: api.CreateOAuthToken200ResponseHeaders{CacheControl: &noStore, Pragma: &noCache},
	}, nil
}

func (h *handlers) GetJWKS(context.Context, api.GetJWKSRequestObject) (api.GetJWKSResponseObject, error) {
	b, err := json.Marshal(h.s.oauth.JWKS())
	if err != nil {
		return nil, err
	}
	return jwksResponse(b), nil
}

// jwksResponse is the key set as go-jose encodes it (RFC 7517/8037).
type jwksResponse []byte

func (r jwksResponse) VisitGetJWKSResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(r)
	return err
}

func (h *handlers) ListSigningKeys(context.Context, api.ListSigningKeysRequestObject) (api.ListSigningKeysResponseObject, error) {
	ks := h.s.oauth.SigningKeys()
	out := api.ListSigningKeys200JSONResponse{Data: make([]api.SigningKey, 0, len(ks))}
	for _, k := range ks {
		out.Data = append(out.Data, toSigningKey(k))
	}
	return out, nil
}

func (h *handlers) RotateSigningKey(ctx context.Context, _ api.RotateSigningKeyRequestObject) (api.RotateSigningKeyResponseObject, error) {
	k, err := h.s.oauth.RotateSigningKey(ctx)
	if err != nil {
		return nil, err
	}
	return api.RotateSigningKey201JSONResponse(toSigningKey(k)), nil
}

func toSigningKey(k oauthserver.SigningKey) api.SigningKey {
	return api.SigningKey{Kid: k.KID, Alg: k.Alg, CreatedAt: k.CreatedAt, RetiredAt: k.RetiredAt}
}

func toOAuthClient(c oauthserver.Client) api.OAuthClient {
	out := api.OAuthClient{Id: c.ID, Name: c.Name, CreatedAt: c.CreatedAt, Version: c.Version}
	out.RateLimit, out.Models, out.Connectors, out.Budget = toAPIPolicy(c.Policy)
	out.Scopes = make([]api.Scope, 0, len(c.Scopes))
	for _, s := range c.Scopes {
		out.Scopes = append(out.Scopes, api.Scope(s))
	}
	return out
}

// tokenEndpoint enforces on POST /v1/oauth/token what the generated form
// binding cannot: a well-formed body with each parameter at most once
// (RFC 6749 §3.2). checkMediaType has already required form encoding.
func (s *Server) tokenEndpoint(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if c.Path() != tokenRoute || r.Method != http.MethodPost {
			return next(c)
		}
		if err := r.ParseForm(); err != nil {
			if classify(err).Kind == errs.TooLarge {
				return err
			}
			return errs.E(errs.Invalid, "the token request body is not valid form encoding")
		}
		if err := oauthserver.CheckForm(r.PostForm); err != nil {
			return err
		}
		return next(c)
	}
}

// writeOAuthError answers errors of the token endpoint in the shape of
// RFC 6749 §5.2.
func writeOAuthError(c echo.Context, status int, e *errs.Error) {
	code := oauthserver.ErrorCode(e)
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	if code == oauthserver.InvalidClient {
		status = http.StatusUnauthorized
		h.Set("WWW-Authenticate", `Basic realm="switchboard"`)
	}
	desc := e.Message
	_ = c.JSON(status, api.OAuthError{Error: api.OAuthErrorError(code), ErrorDescription: &desc})
}
