package server

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connect"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/web"
)

// initWeb builds connect sessions and console sessions, registers the
// pages (outside the strict server: they answer HTML and read forms) and
// has their errors answered as pages.
func (s *Server) initWeb(e *echo.Echo) {
	s.connectSessions = &connect.Sessions{Store: s.store, Connections: s.connections, Runner: s.invoker, OAuth: s.oauthConns}
	s.console = &web.Console{Store: s.store, Vault: s.vault, Authn: s.authn}
	h := &web.Handler{
		Sessions: s.connectSessions, Console: s.console,
		PublicBase:  s.publicBase,
		CallbackURL: func(r *http.Request) string { return s.publicBase(r) + callbackRoute },
	}
	h.Register(e)
	for _, prefix := range []string{web.ConnectPrefix, web.ConsoleRoute, web.StaticPrefix} {
		s.errorWriters[prefix] = web.WriteError
	}
}

// CreateConnectSession implements POST /v1/connect-sessions.
func (h *handlers) CreateConnectSession(ctx context.Context, req api.CreateConnectSessionRequestObject) (api.CreateConnectSessionResponseObject, error) {
	in := connect.CreateInput{Connector: req.Body.Connector, Connection: deref(req.Body.Connection), RedirectURL: deref(req.Body.RedirectUrl)}
	if req.Body.ExpiresIn != nil {
		in.TTL = time.Duration(*req.Body.ExpiresIn) * time.Second
	}
	if p := auth.FromContext(ctx); p != nil {
		in.CreatedBy = p.ID
	}
	c, err := h.s.connectSessions.Create(ctx, in)
	if err != nil {
		return nil, err
	}
	return api.CreateConnectSession201JSONResponse{
		Id: c.ID, Url: h.s.publicBase(requestFrom(ctx)) + connect.PagePath(c.Token),
		Connector: c.Connector, Connection: c.Connection, RedirectUrl: ptrIf(c.RedirectURL), ExpiresAt: c.ExpiresAt,
	}, nil
}

// GetConnectSession implements GET /v1/connect-sessions/{id}.
func (h *handlers) GetConnectSession(ctx context.Context, req api.GetConnectSessionRequestObject) (api.GetConnectSessionResponseObject, error) {
	sess, err := h.s.connectSessions.Get(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetConnectSession200JSONResponse{
		Id: sess.ID, Connector: sess.Connector, Connection: sess.Connection, RedirectUrl: ptrIf(sess.RedirectURL),
		Status: api.ConnectSessionStatus(h.s.connectSessions.StatusOf(sess)), CreatedAt: sess.CreatedAt, ExpiresAt: sess.ExpiresAt, CompletedAt: sess.CompletedAt,
	}, nil
}
