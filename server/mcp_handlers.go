package server

import (
	"cmp"
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/mcp"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/tools"
)

// mcpRoute is the MCP endpoint; mcpRoute + "/{toolset}" serves a toolset.
const mcpRoute = "/mcp"

// protectedResourceRoute is the RFC 9728 metadata of the API; the
// metadata of a resource at path P is at protectedResourceRoute + P.
const protectedResourceRoute = "/.well-known/oauth-protected-resource"

// initMCP builds the MCP server, registers its routes (outside the strict
// server: the SDK reads the body) and the error writer that adds
// WWW-Authenticate to its 401s.
func (s *Server) initMCP(e *echo.Echo) {
	s.mcp = mcp.New(mcp.Options{
		Catalog: s.catalog, Runner: s.invoker, Store: s.store, Version: s.version,
		MaxBodyBytes: s.cfg.Limits.BodyBytes, Logger: s.log,
	})
	s.closers = append(s.closers, func(context.Context) error {
		s.mcp.Close()
		return nil
	})
	e.POST(mcpRoute, s.serveMCP)
	e.POST(mcpRoute+"/:toolset", s.serveMCP)
	s.errorWriters[mcpRoute] = s.writeMCPError
}

// serveMCP hands the request to the MCP server with the caller: the
// credential, the toolset's selection and the connection calls use.
func (s *Server) serveMCP(c echo.Context) error {
	r := c.Request()
	ctx := r.Context()
	caller := mcp.Caller{Principal: auth.FromContext(ctx), RequestID: requestid.From(ctx)}
	if name := c.Param("toolset"); name != "" {
		sel, err := s.toolsets.Selection(ctx, name)
		if err != nil {
			return err
		}
		caller.Selection = sel
	}
	conn, err := tools.Connection(caller.Principal, r.Header.Get(tools.ConnectionHeader))
	if err != nil {
		return err
	}
	caller.Connection = conn
	s.mcp.ServeHTTP(c.Response(), r.WithContext(mcp.WithCaller(ctx, caller)))
	return nil
}

// writeMCPError writes err in the native shape; a 401 also names the
// endpoint's protected resource metadata, where MCP clients discover how
// to get a token.
func (s *Server) writeMCPError(c echo.Context, status int, e *errs.Error) {
	if h := c.Response().Header(); status == http.StatusUnauthorized {
		challenge := cmp.Or(h.Get("WWW-Authenticate"), `Bearer realm="switchboard"`)
		h.Set("WWW-Authenticate", challenge+`, resource_metadata="`+s.publicBase(c.Request())+protectedResourceRoute+c.Request().URL.Path+`", scope="`+auth.ScopeInvoke+`"`)
	}
	writeNativeError(c, status, e)
}

// protectedResource is the RFC 9728 metadata of the resource at path
// (relative to the public base), accepting the scopes listed.
func (s *Server) protectedResource(ctx context.Context, path string, scopes []string) api.ProtectedResourceMetadata {
	base := s.publicBase(requestFrom(ctx))
	issuers := []string{s.cfg.TokenIssuer()}
	for _, x := range s.cfg.OAuth.ExternalIssuers {
		issuers = append(issuers, x.Issuer)
	}
	name := "Switchboard"
	if path != "" {
		name = "Switchboard MCP (" + strings.TrimPrefix(path, "/") + ")"
	}
	return api.ProtectedResourceMetadata{
		Resource: base + path, AuthorizationServers: &issuers, ScopesSupported: &scopes,
		BearerMethodsSupported: &[]string{"header"}, ResourceName: &name,
	}
}

func (h *handlers) GetProtectedResourceMetadata(ctx context.Context, _ api.GetProtectedResourceMetadataRequestObject) (api.GetProtectedResourceMetadataResponseObject, error) {
	return api.GetProtectedResourceMetadata200JSONResponse(h.s.protectedResource(ctx, "", auth.Scopes)), nil
}

func (h *handlers) GetMCPProtectedResourceMetadata(ctx context.Context, _ api.GetMCPProtectedResourceMetadataRequestObject) (api.GetMCPProtectedResourceMetadataResponseObject, error) {
	return api.GetMCPProtectedResourceMetadata200JSONResponse(h.s.protectedResource(ctx, mcpRoute, []string{auth.ScopeInvoke})), nil
}

func (h *handlers) GetMCPToolsetProtectedResourceMetadata(ctx context.Context, req api.GetMCPToolsetProtectedResourceMetadataRequestObject) (api.GetMCPToolsetProtectedResourceMetadataResponseObject, error) {
	return api.GetMCPToolsetProtectedResourceMetadata200JSONResponse(h.s.protectedResource(ctx, mcpRoute+"/"+req.Toolset, []string{auth.ScopeInvoke})), nil
}
