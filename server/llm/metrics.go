package llm

import (
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/metrics"
)

// observe records one provider call in the GenAI metrics (upstream latency
// by provider, tokens by model and type); err is nil on success.
func observe(m *Model, u Usage, d time.Duration, err error) {
	c := metrics.LLMCall{System: m.Provider, Operation: operationName(m), Model: m.Name, Duration: d}
	if err != nil {
		c.ErrorType = string(errs.KindOf(err))
	} else {
		c.InputTokens, c.OutputTokens = u.PromptTokens, u.CompletionTokens
	}
	metrics.ObserveLLM(c)
}

// operationName is the OpenTelemetry gen_ai.operation.name for a model.
func operationName(m *Model) string {
	switch {
	case m.Has(CapEmbeddings):
		return "embeddings"
	case m.Has(CapChat):
		return "chat"
	}
	return "text_completion"
}

// observeBreaker mirrors a provider's circuit breaker state in the metrics.
func observeBreaker(provider string, s BreakerState) {
	metrics.SetProviderCircuit(provider, int(s))
}
