package server

import (
	"bytes"
	"context"
	"html/template"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/web"
)

// callbackRoute is the provider's redirect target.
const callbackRoute = "/v1/oauth/callback"

// initOAuthConnections builds the OAuth connection manager: tokens are
// requested through the egress guard (resolving names with resolver when
// set), connectors are its clients, connection records follow its status,
// and a connector's deletion forgets its OAuth connections.
func (s *Server) initOAuthConnections(resolver egress.Resolver) error {
	guard, err := s.egressGuard(resolver)
	if err != nil {
		return err
	}
	s.oauthConns = oauthconn.New(oauthconn.Options{
		Store:      s.store,
		Vault:      s.vault,
		Owner:      s.leases.Owner(),
		Events:     serverEvents{s},
		Lookup:     s.oauthClient,
		HTTPClient: guard.Client(oauthconn.DefaultTokenTimeout),
		Logger:     s.log,
		Skew:       s.cfg.Connectors.OAuthRefreshSkew.D(),
		Hooks: oauthconn.Hooks{
			// The connection record (its status) follows the OAuth state.
			Status: func(tx store.Tx, connector, connection, status string) error {
				if s.connections == nil {
					return nil
				}
				return s.connections.SetStatusTx(tx, connector, connection, status)
			},
			EventData: s.oauthConnectionEventData,
		},
	})
	s.connectors.OnDeleteConnector = append(s.connectors.OnDeleteConnector, s.oauthConns.ForgetConnector)
	if s.errorWriters == nil {
		s.errorWriters = map[string]errorWriter{}
	}
	s.errorWriters[callbackRoute] = writeCallbackError
	return nil
}

// OAuthConnections returns the OAuth connection manager (the invocation
// engine asks it for tokens).
func (s *Server) OAuthConnections() *oauthconn.Manager { return s.oauthConns }

// oauthConnectionEventData is an OAuth connection as the API shows it,
// read inside tx (the data of connection.reauth_required).
func (s *Server) oauthConnectionEventData(tx store.Tx, connector, name string) (any, error) {
	c, err := connectors.LoadConnection(tx, connector, name)
	if err != nil {
		return nil, err
	}
	out := api.Connection{
		Connector: c.Connector, Name: c.Name, AuthType: api.ConnectionAuthType(c.AuthType),
		Status: api.ConnectionStatus(c.Status), CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(), Version: c.Version,
	}
	st, err := s.oauthConns.Status(tx, connector, name)
	if err != nil || st == nil {
		return out, err
	}
	out.Status = api.ConnectionStatus(st.Status)
	if len(st.Scopes) > 0 {
		scopes := slices.Clone(st.Scopes)
		out.Scopes = &scopes
	}
	out.ExpiresAt, out.LastRefreshedAt = st.ExpiresAt, st.LastRefreshedAt
	return out, nil
}

// serverEvents records through whatever recorder the server has when the
// event happens (the webhooks outbox is wired after the domains).
type serverEvents struct{ s *Server }

func (e serverEvents) Record(tx store.Tx, typ string, data any) error {
	return e.s.events.Record(tx, typ, data)
}

// oauthClient reads a connector's OAuth 2.0 client, secret included.
func (s *Server) oauthClient(tx store.Tx, name string) (oauthconn.Client, error) {
	c, err := connectors.LoadConnector(tx, name)
	if err != nil {
		return oauthconn.Client{}, err
	}
	a := c.Auth
	if a.Type != connectors.AuthOAuth2 {
		return oauthconn.Client{}, errs.E(errs.Invalid, "connector %q uses auth type %s, not oauth2", name, a.Type)
	}
	secret, err := s.connectors.ClientSecret(tx, name)
	if err != nil {
		return oauthconn.Client{}, err
	}
	return oauthconn.Client{
		Connector: name, Grant: a.Grant,
		AuthorizationURL: a.AuthorizationURL, TokenURL: a.TokenURL,
		ClientID: a.ClientID, ClientSecret: secret, Scopes: a.Scopes,
		AuthParams: a.AuthorizationParams, TokenParams: a.TokenParams,
		ClientAuth: a.ClientAuth, RedirectURLs: a.RedirectURLs,
	}, nil
}

// requestKey carries the *http.Request of the OAuth connection operations
// into their strict handlers (callback URL fallback, content negotiation).
type requestKey struct{}

// withHTTPRequest is a strict middleware giving the OAuth connection
// handlers their request; it also keeps the callback's URL (which holds
// the code and state) out of Referer headers and caches.
func withHTTPRequest(f api.StrictHandlerFunc, operationID string) api.StrictHandlerFunc {
	browser := operationID == "ConnectOAuthConnection" || operationID == "CompleteOAuthConnection"
	if !browser && !strings.HasSuffix(operationID, "ProtectedResourceMetadata") && operationID != "CreateConnectSession" {
		return f
	}
	return func(c echo.Context, request any) (any, error) {
		if browser {
			h := c.Response().Header()
			h.Set("Cache-Control", "no-store")
			h.Set("Referrer-Policy", "no-referrer")
		}
		r := c.Request()
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), requestKey{}, r)))
		return f(c, request)
	}
}

func requestFrom(ctx context.Context) *http.Request {
	r, _ := ctx.Value(requestKey{}).(*http.Request)
	return r
}

// publicBase is publicUrl without its trailing slash, or else the scheme
// and host the request came to.
func (s *Server) publicBase(r *http.Request) string {
	if base := strings.TrimRight(s.cfg.PublicURL, "/"); base != "" {
		return base
	}
	scheme, host := "http", "127.0.0.1"
	if r != nil {
		if r.TLS != nil {
			scheme = "https"
		}
		host = r.Host
	}
	return scheme + "://" + host
}

// callbackURL is <publicUrl>/v1/oauth/callback, or, without publicUrl, the
// scheme and Host of the request.
func (s *Server) callbackURL(ctx context.Context) string {
	return s.publicBase(requestFrom(ctx)) + callbackRoute
}

// ConnectOAuthConnection implements GET /v1/connectors/{name}/connect.
func (h *handlers) ConnectOAuthConnection(ctx context.Context, req api.ConnectOAuthConnectionRequestObject) (api.ConnectOAuthConnectionResponseObject, error) {
	connection := "default"
	if req.Params.Connection != nil {
		connection = *req.Params.Connection
	}
	redirect := ""
	if req.Params.Redirect != nil {
		redirect = *req.Params.Redirect
	}
	b, err := h.s.oauthConns.Begin(ctx, oauthconn.BeginInput{Connector: req.Name, Connection: connection,
		Redirect: redirect, CallbackURL: h.s.callbackURL(ctx)})
	if err != nil {
		return nil, err
	}
	noStore := "no-store"
	return api.ConnectOAuthConnection302Response{Headers: api.ConnectOAuthConnection302ResponseHeaders{
		Location: &b.AuthorizationURL, CacheControl: &noStore}}, nil
}

// CompleteOAuthConnection implements GET /v1/oauth/callback.
func (h *handlers) CompleteOAuthConnection(ctx context.Context, req api.CompleteOAuthConnectionRequestObject) (api.CompleteOAuthConnectionResponseObject, error) {
	p := req.Params
	res, err := h.s.oauthConns.Complete(ctx, oauthconn.CallbackInput{State: deref(p.State), Code: deref(p.Code),
		Error: deref(p.Error), ErrorDescription: deref(p.ErrorDescription)})
	if res.ReturnTo != "" {
		// A connect session's authorization: its page shows the outcome.
		loc := web.ReturnURL(res.ReturnTo, err)
		return api.CompleteOAuthConnection302Response{Headers: api.CompleteOAuthConnection302ResponseHeaders{Location: &loc}}, nil
	}
	if err != nil {
		return nil, err
	}
	if res.Redirect != "" {
		u, err := url.Parse(res.Redirect)
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "stored redirect is not a URL")
		}
		q := u.Query()
		q.Set("connector", res.Connector)
		q.Set("connection", res.Connection)
		u.RawQuery = q.Encode()
		loc := u.String()
		return api.CompleteOAuthConnection302Response{Headers: api.CompleteOAuthConnection302ResponseHeaders{Location: &loc}}, nil
	}
	st := res.Status
	if r := requestFrom(ctx); r != nil && wantsHTML(r.Header.Get("Accept")) {
		var buf bytes.Buffer
		if err := callbackPage.Execute(&buf, map[string]any{
			"Title":   "Connected",
			"Message": "Connection \u201c" + res.Connection + "\u201d of connector \u201c" + res.Connector + "\u201d is connected. You can close this window.",
		}); err != nil {
			return nil, err
		}
		return api.CompleteOAuthConnection200TexthtmlResponse{Body: &buf, ContentLength: int64(buf.Len())}, nil
	}
	out := api.CompleteOAuthConnection200JSONResponse{Connector: res.Connector, Connection: res.Connection,
		Status: api.OAuthConnectionStatus(st.Status), ExpiresAt: st.ExpiresAt, LastRefreshedAt: st.LastRefreshedAt}
	if len(st.Scopes) > 0 {
		out.Scopes = &st.Scopes
	}
	return out, nil
}

// wantsHTML reports whether an Accept header prefers HTML to JSON (a
// browser's does; an API client's, or none, does not).
func wantsHTML(accept string) bool {
	html, json := -1.0, -1.0
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		switch mt {
		case "text/html":
			html = max(html, q)
		case "application/json":
			json = max(json, q)
		}
	}
	return html > 0 && html >= json
}

// writeCallbackError answers a failed callback: a short page for browsers,
// the usual JSON error otherwise.
func writeCallbackError(c echo.Context, status int, e *errs.Error) {
	rid := requestid.From(c.Request().Context())
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	if !wantsHTML(c.Request().Header.Get("Accept")) {
		writeNativeError(c, status, e)
		return
	}
	title := "Connection failed"
	if e.Kind == errs.Forbidden {
		title = "Consent denied"
	}
	var buf bytes.Buffer
	if err := callbackPage.Execute(&buf, map[string]any{"Title": title, "Message": e.Message, "Code": string(e.Kind), "RequestID": rid}); err != nil {
		_ = c.String(status, e.Message)
		return
	}
	_ = c.HTMLBlob(status, buf.Bytes())
}

// callbackPage is the page a browser sees at the end of a callback.
var callbackPage = template.Must(template.New("callback").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="referrer" content="no-referrer"><title>Switchboard: {{.Title}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;color:#222}
code{background:#f2f2f2;padding:0 .25rem}small{color:#666}</style></head>
<body><h1>{{.Title}}</h1><p>{{.Message}}</p>
{{if .Code}}<p><small>Error <code>{{.Code}}</code>{{if .RequestID}}, request <code>{{.RequestID}}</code>{{end}}</small></p>{{end}}
</body></html>
`))

// oauthExtrasFromAPI copies the OAuth 2.0 extras of a connector's auth
// from the wire.
func oauthExtrasFromAPI(a api.ConnectorAuth, out *connectors.Auth) {
	if a.AuthorizationParams != nil {
		out.AuthorizationParams = *a.AuthorizationParams
	}
	if a.TokenParams != nil {
		out.TokenParams = *a.TokenParams
	}
	if a.ClientAuth != nil {
		out.ClientAuth = string(*a.ClientAuth)
	}
	if a.RedirectUrls != nil {
		out.RedirectURLs = *a.RedirectUrls
	}
}

// oauthExtrasToAPI copies the OAuth 2.0 extras of a connector's auth to
// the wire.
func oauthExtrasToAPI(a connectors.Auth, out *api.ConnectorAuth) {
	if len(a.AuthorizationParams) > 0 {
		m := maps.Clone(a.AuthorizationParams)
		out.AuthorizationParams = &m
	}
	if len(a.TokenParams) > 0 {
		m := maps.Clone(a.TokenParams)
		out.TokenParams = &m
	}
	if a.ClientAuth != "" {
		ca := api.ConnectorAuthClientAuth(a.ClientAuth)
		out.ClientAuth = &ca
	}
	if len(a.RedirectURLs) > 0 {
		r := slices.Clone(a.RedirectURLs)
		out.RedirectUrls = &r
	}
}
