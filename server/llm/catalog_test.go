package llm

import (
	"encoding/json"
	"testing"
)

// TestModelCostIsExactDecimal checks that a known price times a token
// count gives the exact decimal, not float noise.
func TestModelCostIsExactDecimal(t *testing.T) {
	tests := []struct {
		name    string
		pricing *Pricing
		u       Usage
		want    string // as encoding/json writes it
	}{
		{"470 prompt tokens at $0.15 per million", &Pricing{Input: 0.15, Output: 0.60}, Usage{PromptTokens: 470}, "0.0000705"},
		{"prompt and completion", &Pricing{Input: 0.15, Output: 0.60}, Usage{PromptTokens: 19, CompletionTokens: 10}, "0.00000885"},
		{"four-decimal price", &Pricing{Input: 0.0375, Output: 0.3}, Usage{PromptTokens: 333, CompletionTokens: 7}, "0.0000145875"},
		{"a million tokens cost the price", &Pricing{Input: 2.5, Output: 10}, Usage{PromptTokens: 1e6, CompletionTokens: 1e6}, "12.5"},
		{"no pricing is free", nil, Usage{PromptTokens: 470}, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Model{Pricing: tt.pricing}
			if b, _ := json.Marshal(m.Cost(tt.u)); string(b) != tt.want {
				t.Fatalf("Cost(%+v) encodes as %s, want %s", tt.u, b, tt.want)
			}
		})
	}
}
