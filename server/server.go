// Package server is Switchboard's control plane: it wires the domain
// packages behind an Echo HTTP server. Handlers only translate between the
// wire (server/api, generated from openapi.yaml) and the domain.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/budget"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connect"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/lease"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/mcp"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthserver"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ratelimit"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redisconn"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/responses"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/tools"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/web"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/webhooks"
)

// Options are what New needs; Store and Vault are required.
type Options struct {
	Config config.Config
	Store  store.Store
	Vault  *vault.Vault
	Logger *slog.Logger
	// Resolver, when set, resolves the host names of outgoing requests
	// (tests); the system resolver otherwise.
	Resolver egress.Resolver
	// Version is the build's version, reported to MCP clients.
	Version string
}

// Server is the control plane: an http.Handler plus its background workers.
type Server struct {
	cfg           config.Config
	store         store.Store
	vault         *vault.Vault
	log           *slog.Logger
	echo          *echo.Echo
	events        events.Recorder
	eventQueue    *events.Queue
	keys          *auth.Keys
	connectors    *connectors.Service
	authn         auth.Chain
	oauth         *oauthserver.Service
	limiter       ratelimit.Limiter
	redis         *redis.Client // nil unless redis.url is set
	redisFallback *redisconn.Fallback
	limitEvents   *rateLimitEvents // reports 429s as ratelimit.exceeded
	llm           *llm.Gateway
	usage         *usage.Recorder
	responses     *responses.Keeper
	budget        *budget.Tracker
	webhooks      *webhooks.Service
	oauthConns    *oauthconn.Manager
	connections   *connectors.Connections
	invoker       *connectors.Invoker
	catalog       *tools.Catalog
	toolsets      *tools.Toolsets
	mcp           *mcp.Server
	// connectSessions and console serve the pages (server/web).
	connectSessions *connect.Sessions
	console         *web.Console
	version         string
	scopes          routeScopes
	errorWriters    map[string]errorWriter
	// closers run in reverse order on Close (workers, flushers).
	closers []func(context.Context) error

	// leases coordinate background work with the other replicas sharing
	// the store, under this replica's owner id (random per process).
	leases *lease.Manager
}

// New builds the server and starts its background workers.
func New(o Options) (*Server, error) {
	if o.Store == nil || o.Vault == nil {
		return nil, errors.New("server: Store and Vault are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{cfg: o.Config, store: o.Store, vault: o.Vault, log: o.Logger, events: events.Nop{}, version: cmp.Or(o.Version, buildVersion())}
	s.leases = lease.New(s.store, lease.Options{})
	// Webhooks first: they are the event Recorder every other service gets.
	if err := s.initWebhooks(); err != nil {
		return nil, err
	}
	s.keys = &auth.Keys{Store: s.store, Events: s.events}
	s.connectors = &connectors.Service{Store: s.store, Vault: s.vault, Events: s.events, MaxTimeout: s.cfg.Connectors.MaxTimeout.D()}
	if err := s.initOAuthConnections(o.Resolver); err != nil {
		return nil, err
	}
	if err := s.initIntegrations(o.Resolver); err != nil {
		return nil, err
	}
	s.catalog = &tools.Catalog{Store: s.store}
	s.toolsets = &tools.Toolsets{Store: s.store, Events: s.events}
	oauth, err := oauthserver.New(context.Background(), oauthserver.Options{Store: s.store, Vault: s.vault, Config: s.cfg, Logger: s.log})
	if err != nil {
		return nil, err
	}
	s.oauth = oauth
	s.authn = auth.Chain{s.keys, s.oauth}
	if err := s.initLimits(); err != nil {
		return nil, err
	}
	if err := s.initLLM(o.Resolver); err != nil {
		return nil, err
	}
	s.initResponses()
	s.budget = &budget.Tracker{Usage: s.usage, Events: s.eventQueue, Log: s.log, Ledger: s.budgetLedger()}
	s.limitEvents = &rateLimitEvents{queue: s.eventQueue}
	s.llm.Admission = llmAdmission{l: s.limiter, budget: s.budget, events: s.limitEvents}

	spec, err := loadedSpec()
	if err != nil {
		return nil, err
	}
	s.scopes, err = scopesFromSpec(spec)
	if err != nil {
		return nil, err
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.JSONSerializer = strictJSON{}
	e.Pre(requestID)
	e.Use(s.observeRequests)
	e.Use(s.logRequests, s.recoverPanics, s.limitBody, s.authenticate, s.checkPathParams, s.checkMediaType)
	e.Use(s.rateLimit, s.tokenEndpoint, s.protectMetrics)
	if s.errorWriters == nil {
		s.errorWriters = map[string]errorWriter{}
	}
	s.errorWriters[tokenRoute] = writeOAuthError
	s.echo = e

	h := &handlers{s: s}
	api.RegisterHandlers(e, api.NewStrictHandler(h, []api.StrictMiddlewareFunc{withHTTPRequest, withConnectionHeader}))
	s.initMCP(e)
	s.initWeb(e)
	if err := s.checkRoutesInSpec(); err != nil {
		return nil, err
	}
	s.webhooks.Start()
	return s, nil
}

// buildVersion is the main module's version as the Go toolchain stamped it.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Keys returns the API key manager (bootstrap, tests).
func (s *Server) Keys() *auth.Keys { return s.keys }

// ConnectSessions returns the connect sessions service.
func (s *Server) ConnectSessions() *connect.Sessions { return s.connectSessions }

// Toolsets returns the toolsets service.
func (s *Server) Toolsets() *tools.Toolsets { return s.toolsets }

// Connectors returns the connector and action definitions service.
func (s *Server) Connectors() *connectors.Service { return s.connectors }

// Close stops background workers, flushing what they hold, then releases
// every lease this replica holds, so that the other replicas take its
// background work (webhook lanes, housekeeping jobs) over at once.
func (s *Server) Close(ctx context.Context) error {
	var errList []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errList = append(errList, s.closers[i](ctx))
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.leases.ReleaseAll(rctx); err != nil {
		errList = append(errList, fmt.Errorf("release leases: %w", err))
	}
	return errors.Join(errList...)
}

// Leases returns the replica's lease manager; its Owner is the replica's
// id, logged at start and recorded in the leases it holds.
func (s *Server) Leases() *lease.Manager { return s.leases }

// handlers implements api.StrictServerInterface; its methods live in the
// *_handlers.go files, one per domain.
type handlers struct{ s *Server }

var _ api.StrictServerInterface = (*handlers)(nil)

// egressGuard is an egress guard with the operator's egress.allow,
// resolving host names with resolver when set (Options.Resolver).
func (s *Server) egressGuard(resolver egress.Resolver) (*egress.Guard, error) {
	var opts []egress.Option
	if resolver != nil {
		opts = append(opts, egress.WithResolver(resolver))
	}
	return egress.New(s.cfg.Egress.Allow, opts...)
}
