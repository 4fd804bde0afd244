package server

import (
	"context"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/metrics"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/tools"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/transform"
)

// initIntegrations builds connections, the invocation engine (egress
// guard, transformation sandbox, invocation log) and registers what a
// connector's deletion must delete with it.
func (s *Server) initIntegrations(resolver egress.Resolver) error {
	guard, err := s.egressGuard(resolver)
	if err != nil {
		return err
	}
	cc := s.cfg.Connectors
	sandbox, err := transform.NewSandbox(transform.Options{
		Timeout:        cc.TransformTimeout.D(),
		MaxOutputBytes: cc.TransformMaxOutputBytes,
		MaxMemoryBytes: cc.TransformMaxMemoryBytes,
		Logger:         s.log,
	})
	if err != nil {
		return err
	}
	s.connections = &connectors.Connections{Store: s.store, Vault: s.vault, Events: serverEvents{s}}
	if s.oauthConns != nil {
		s.connections.OnDelete = append(s.connections.OnDelete, s.oauthConns.Forget)
		s.connections.OnCredentialsDropped = append(s.connections.OnCredentialsDropped, s.oauthConns.DropTokens)
	}
	// A connector whose baseUrl the guard refuses is refused when saved;
	// one retargeted drops its connections' credentials.
	s.connectors.Guard = guard
	s.connectors.OnCredentialsMoved = append(s.connectors.OnCredentialsMoved, s.connections.CredentialsMovedTx)
	log := &connectors.InvocationLog{Store: s.store, Size: cc.InvocationLogSize, Events: serverEvents{s}, Logger: s.log}
	log.Start()
	s.invoker = &connectors.Invoker{
		Store: s.store, Connections: s.connections, Guard: guard, Sandbox: sandbox, Log: log,
		DefaultTimeout: cc.DefaultTimeout.D(), MaxTimeout: cc.MaxTimeout.D(),
		MaxResponseBytes: cc.MaxResponseBytes, Retries: cc.Retries, MaxRetryAfter: cc.MaxRetryAfter.D(),
		Observe: func(connector string, ok bool, d time.Duration) {
			outcome := metrics.OutcomeSuccess
			if !ok {
				outcome = metrics.OutcomeError
			}
			metrics.ObserveInvocation(connector, outcome, d)
		},
	}
	if s.oauthConns != nil {
		s.invoker.OAuth = s.oauthConns
	}
	s.connectors.OnDeleteConnector = append(s.connectors.OnDeleteConnector, s.connections.DeleteConnectorTx, log.DeleteConnectorTx)
	s.closers = append(s.closers, func(ctx context.Context) error {
		_ = sandbox.Close()
		return log.Close(ctx)
	})
	return nil
}

// Invoker returns the action invocation engine.
func (s *Server) Invoker() *connectors.Invoker { return s.invoker }

func (h *handlers) RunAction(ctx context.Context, req api.RunActionRequestObject) (api.RunActionResponseObject, error) {
	p := auth.FromContext(ctx)
	conn, err := tools.Connection(p, deref(req.Body.Connection))
	if err != nil {
		return nil, err
	}
	in := connectors.RunInput{Connector: req.Connector, Action: req.Body.Action, Connection: conn, RequestID: requestid.From(ctx),
		MayCreateConnection: p.Has(auth.ScopeConnectorsWrite)}
	if req.Body.Params != nil {
		in.Params = *req.Body.Params
	}
	res, err := h.s.invoker.Run(ctx, in)
	if err != nil {
		return nil, err
	}
	return api.RunAction200JSONResponse{Result: res.Result, Status: res.Status, DurationMs: res.DurationMs}, nil
}

func (h *handlers) ListInvocations(ctx context.Context, req api.ListInvocationsRequestObject) (api.ListInvocationsResponseObject, error) {
	limit, err := pageLimit(req.Params.Limit)
	if err != nil {
		return nil, err
	}
	list, next, err := h.s.invoker.Log.List(ctx, req.Name, deref(req.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	out := api.ListInvocations200JSONResponse{Data: make([]api.Invocation, 0, len(list))}
	for _, inv := range list {
		out.Data = append(out.Data, api.Invocation{
			Connector: inv.Connector, Action: inv.Action, Connection: ptrIf(inv.Connection),
			Status: intPtrIf(inv.Status), DurationMs: inv.DurationMs, ErrorCode: ptrIf(inv.ErrorCode),
			RequestId: ptrIf(inv.RequestID), CreatedAt: inv.CreatedAt.UTC(),
		})
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

func intPtrIf(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// Connections returns the connection store (static credentials).
func (s *Server) Connections() *connectors.Connections { return s.connections }
