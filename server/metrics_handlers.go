package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/metrics"
)

// metricsRoute serves Prometheus metrics.
const metricsRoute = "/metrics"

func (h *handlers) GetMetrics(context.Context, api.GetMetricsRequestObject) (api.GetMetricsResponseObject, error) {
	return metricsResponse{}, nil
}

// metricsResponse writes the registry in the text exposition format.
type metricsResponse struct{}

func (metricsResponse) VisitGetMetricsResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", metrics.ContentType)
	w.WriteHeader(http.StatusOK)
	return metrics.WriteText(w)
}

// observeRequests records every request in
// http_server_request_duration_seconds by route template and final status.
// It runs outermost, so it handles a handler's error itself (through the
// central error handler) to see the status actually sent.
func (s *Server) observeRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		route := c.Path()
		if _, known := s.scopes[routeKey{c.Request().Method, route}]; !known {
			route = "other" // 404/405: never a raw path as a label
		}
		metrics.ObserveHTTP(c.Request().Method, route, c.Response().Status, time.Since(start))
		return nil
	}
}

// protectMetrics requires a bearer credential with the scope of
// metrics.requireScope on GET /metrics when that is configured; the spec
// marks the route optionally authenticated.
func (s *Server) protectMetrics(next echo.HandlerFunc) echo.HandlerFunc {
	scope := s.cfg.Metrics.RequireScope
	if scope == "" {
		return next
	}
	return func(c echo.Context) error {
		if c.Path() != metricsRoute {
			return next(c)
		}
		scheme, cred, _ := strings.Cut(c.Request().Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(cred) == "" {
			return errs.E(errs.Unauthenticated, "/metrics requires Authorization: Bearer <credential with scope %s>", scope)
		}
		p, err := s.authn.Authenticate(c.Request().Context(), strings.TrimSpace(cred))
		if err != nil {
			return err
		}
		if err := p.Require(scope); err != nil {
			return err
		}
		return next(c)
	}
}
