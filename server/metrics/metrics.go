// Package metrics holds Switchboard's Prometheus metrics and the small API
// the other packages call to record them. Metric and label names follow the
// OpenTelemetry semantic conventions where one fits (HTTP server duration,
// GenAI client token usage and operation duration), translated to
// Prometheus the way the OpenTelemetry Prometheus exporter does (dots become
// underscores, the unit becomes a suffix); the rest are prefixed
// `switchboard_`.
//
// Every function is safe for concurrent use and cheap (a label lookup and an
// atomic add), so it can sit on a hot path. Label values that come from
// configuration (provider, model, connector names) are bounded by it; no
// label ever carries a caller-chosen free-form value or a secret.
package metrics

import (
	"io"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// Registry holds every Switchboard metric plus the Go runtime and process
// collectors. It is process-wide: several servers in one process (tests)
// share it, so tests compare values before and after.
var Registry = prometheus.NewRegistry()

// Outcomes used as label values.
const (
	// OutcomeSuccess is a call or delivery that succeeded.
	OutcomeSuccess = "success"
	// OutcomeError is a call that failed (upstream, transformation, validation).
	OutcomeError = "error"
	// OutcomeRetry is a delivery attempt that failed and will be retried.
	OutcomeRetry = "retry"
	// OutcomeFailed is a delivery that failed for good (retries exhausted).
	OutcomeFailed = "failed"
)

// Token types of gen_ai_client_token_usage (OpenTelemetry gen_ai.token.type).
const (
	TokenInput  = "input"
	TokenOutput = "output"
)

var (
	// OpenTelemetry http.server.request.duration; its _count is the number of requests.
	httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "http_server_request_duration_seconds",
		Help:    "Duration of HTTP server requests by method, route template and status (OpenTelemetry http.server.request.duration); _count counts requests.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60},
	}, []string{"http_request_method", "http_route", "http_response_status_code"})

	// OpenTelemetry gen_ai.client.operation.duration.
	genAIDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_operation_duration_seconds",
		Help:    "Duration of calls to language-model providers (upstream latency) by provider, operation, model and error type (OpenTelemetry gen_ai.client.operation.duration).",
		Buckets: []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92},
	}, []string{"gen_ai_system", "gen_ai_operation_name", "gen_ai_request_model", "error_type"})

	// OpenTelemetry gen_ai.client.token.usage; _sum is the total of tokens.
	genAITokens = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_token_usage",
		Help:    "Tokens used per language-model call by provider, operation, model and token type input|output (OpenTelemetry gen_ai.client.token.usage); _sum is the total.",
		Buckets: []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304},
	}, []string{"gen_ai_system", "gen_ai_operation_name", "gen_ai_request_model", "gen_ai_token_type"})

	invocations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_connector_invocations_total",
		Help: "Connector action invocations by connector and outcome (success|error).",
	}, []string{"connector", "outcome"})

	invocationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "switchboard_connector_invocation_duration_seconds",
		Help:    "Duration of connector action invocations, upstream call and transformation included, by connector.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"connector"})

	webhookDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_webhook_deliveries_total",
		Help: "Webhook delivery attempts by outcome: success, retry (failed, will be retried) or failed (retries exhausted).",
	}, []string{"outcome"})

	webhookDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "switchboard_webhook_delivery_duration_seconds",
		Help:    "Duration of webhook delivery attempts.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	})

	rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_rate_limit_refusals_total",
		Help: "Requests refused with 429 by the per-credential limiter, by limit (requests|tokens|control_requests) and credential kind (api_key|oauth_token).",
	}, []string{"limit", "credential_kind"})

	redisUnavailable = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_redis_unavailable_total",
		Help: "Decisions taken without Redis because it did not answer within redis.timeout, by what needed it (ratelimit|budget) and redis.failMode: open admitted the request, closed refused it with 503.",
	}, []string{"use", "fail_mode"})

	providerCircuit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "switchboard_llm_provider_circuit_state",
		Help: "State of each language-model provider's circuit breaker: 0 closed (healthy), 1 open (skipped as down), 2 half-open (one trial call let through).",
	}, []string{"gen_ai_system"})

	tokensIssued = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_oauth_tokens_issued_total",
		Help: "OAuth access tokens requested at /v1/oauth/token by outcome (success, or the RFC 6749 error code).",
	}, []string{"outcome"})
)

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		httpDuration, genAIDuration, genAITokens,
		invocations, invocationDuration,
		webhookDeliveries, webhookDuration,
		rateLimited, tokensIssued, providerCircuit, redisUnavailable,
	)
}

// statusText caches the decimal form of common HTTP statuses.
var statusText = func() [600]string {
	var s [600]string
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func status(code int) string {
	if code >= 0 && code < len(statusText) {
		return statusText[code]
	}
	return strconv.Itoa(code)
}

// ObserveHTTP records one served HTTP request. route is the route template
// (`/v1/connectors/:name`), never the raw path, so that cardinality stays
// bounded.
func ObserveHTTP(method, route string, code int, d time.Duration) {
	httpDuration.WithLabelValues(method, route, status(code)).Observe(d.Seconds())
}

// LLMCall describes one call to a language-model provider.
type LLMCall struct {
	// System is the configured provider name (the <provider> of model ids).
	System string
	// Operation is the OpenTelemetry gen_ai.operation.name: chat,
	// text_completion, embeddings (function calling is a chat).
	Operation string
	// Model is the model name as requested, without the provider part.
	Model string
	// Duration is the upstream latency (until the last byte of a stream).
	Duration time.Duration
	// ErrorType is empty on success, else a short class such as the error
	// code (upstream_error, upstream_timeout, rate_limited).
	ErrorType string
	// InputTokens and OutputTokens are the call's usage; zero is not recorded.
	InputTokens, OutputTokens int
}

// ObserveLLM records one provider call: its latency and its token usage.
func ObserveLLM(c LLMCall) {
	genAIDuration.WithLabelValues(c.System, c.Operation, c.Model, c.ErrorType).Observe(c.Duration.Seconds())
	if c.InputTokens > 0 {
		genAITokens.WithLabelValues(c.System, c.Operation, c.Model, TokenInput).Observe(float64(c.InputTokens))
	}
	if c.OutputTokens > 0 {
		genAITokens.WithLabelValues(c.System, c.Operation, c.Model, TokenOutput).Observe(float64(c.OutputTokens))
	}
}

// ObserveInvocation records one connector action invocation; outcome is
// OutcomeSuccess or OutcomeError.
func ObserveInvocation(connector, outcome string, d time.Duration) {
	invocations.WithLabelValues(connector, outcome).Inc()
	invocationDuration.WithLabelValues(connector).Observe(d.Seconds())
}

// ObserveWebhookDelivery records one delivery attempt; outcome is
// OutcomeSuccess, OutcomeRetry or OutcomeFailed.
func ObserveWebhookDelivery(outcome string, d time.Duration) {
	webhookDeliveries.WithLabelValues(outcome).Inc()
	webhookDuration.Observe(d.Seconds())
}

// RateLimited records one 429 of the per-credential limiter; limit is
// "requests", "tokens" or "control_requests", kind the credential kind.
func RateLimited(limit, kind string) {
	rateLimited.WithLabelValues(limit, kind).Inc()
}

// RedisUnavailable counts one decision taken without Redis by use
// (ratelimit, budget) under failMode (open, closed).
func RedisUnavailable(use, failMode string) {
	redisUnavailable.WithLabelValues(use, failMode).Inc()
}

// SetProviderCircuit records the state of a provider's circuit breaker
// (0 closed, 1 open, 2 half-open).
func SetProviderCircuit(provider string, state int) {
	providerCircuit.WithLabelValues(provider).Set(float64(state))
}

// TokenIssued records one request to the token endpoint; outcome is
// OutcomeSuccess or the RFC 6749 error code.
func TokenIssued(outcome string) {
	tokensIssued.WithLabelValues(outcome).Inc()
}

// ContentType is the media type WriteText produces.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// WriteText writes every metric in the Prometheus text exposition format.
func WriteText(w io.Writer) error {
	mfs, err := Registry.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}
