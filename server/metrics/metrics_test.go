package metrics

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestRecorders(t *testing.T) {
	tests := []struct {
		name   string
		record func()
		value  func() float64
		want   float64
	}{
		{"http", func() { ObserveHTTP("GET", "/v1/x", 200, time.Millisecond) },
			func() float64 { return float64(testutil.CollectAndCount(httpDuration)) }, 1},
		{"connector success", func() { ObserveInvocation("weather", OutcomeSuccess, time.Millisecond) },
			func() float64 { return testutil.ToFloat64(invocations.WithLabelValues("weather", OutcomeSuccess)) }, 1},
		{"connector error", func() { ObserveInvocation("weather", OutcomeError, time.Millisecond) },
			func() float64 { return testutil.ToFloat64(invocations.WithLabelValues("weather", OutcomeError)) }, 1},
		{"webhook retry", func() { ObserveWebhookDelivery(OutcomeRetry, time.Millisecond) },
			func() float64 { return testutil.ToFloat64(webhookDeliveries.WithLabelValues(OutcomeRetry)) }, 1},
		{"rate limited", func() { RateLimited("tokens", "api_key") },
			func() float64 { return testutil.ToFloat64(rateLimited.WithLabelValues("tokens", "api_key")) }, 1},
		{"token issued", func() { TokenIssued("invalid_client") },
			func() float64 { return testutil.ToFloat64(tokensIssued.WithLabelValues("invalid_client")) }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.value()
			tc.record()
			if got := tc.value() - before; got != tc.want {
				t.Errorf("grew by %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLLMAndExposition(t *testing.T) {
	ObserveLLM(LLMCall{System: "openai", Operation: "chat", Model: "gpt-4o-mini", Duration: 300 * time.Millisecond, InputTokens: 12, OutputTokens: 30})
	ObserveLLM(LLMCall{System: "openai", Operation: "chat", Model: "gpt-4o-mini", Duration: time.Second, ErrorType: "upstream_timeout"})
	var buf bytes.Buffer
	if err := WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("exposition does not parse: %v", err)
	}
	for _, name := range []string{"gen_ai_client_operation_duration_seconds", "gen_ai_client_token_usage", "go_goroutines"} {
		if mfs[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	out := buf.String()
	for _, want := range []string{
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_request_model="gpt-4o-mini",gen_ai_system="openai",gen_ai_token_type="input"} 12`,
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_request_model="gpt-4o-mini",gen_ai_system="openai",gen_ai_token_type="output"} 30`,
		`gen_ai_client_operation_duration_seconds_count{error_type="upstream_timeout",gen_ai_operation_name="chat",gen_ai_request_model="gpt-4o-mini",gen_ai_system="openai"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %s", want)
		}
	}
}
