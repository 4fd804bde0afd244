package llm

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
)

// cannedTransport answers every request with the same response, in memory.
type cannedTransport struct{ body []byte }

func (c cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(c.body)), Request: r}, nil
}

// BenchmarkGatewayComplete is the gateway's own cost per chat call:
// validation, model lookup, translation to the provider's wire format and
// back, usage accounting; the upstream answers in memory.
func BenchmarkGatewayComplete(b *testing.B) {
	for _, tc := range []struct{ name, typ, fixture string }{
		{"openai", TypeOpenAI, "openai/chat_completion.json"},
		{"anthropic", TypeAnthropic, "anthropic/message.json"},
		{"gemini", TypeGemini, "gemini/generate.json"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cat, err := NewCatalog(context.Background(), []config.Provider{{Name: "p", Type: tc.typ, BaseURL: "http://upstream.invalid/v1",
				Models: []config.Model{{Name: "m", MaxTokens: 8192, Pricing: &config.Pricing{Input: 1, Output: 2}}}}},
				CatalogOptions{Logger: quietLog, Transport: cannedTransport{fixture(b, tc.fixture)}})
			if err != nil {
				b.Fatal(err)
			}
			g := &Gateway{Catalog: cat, Usage: &memRecorder{}, Log: quietLog}
			ctx := auth.WithPrincipal(context.Background(), &auth.Principal{ID: "key_1"})
			b.ReportAllocs()
			for b.Loop() {
				r := &Request{Model: "p/m", Messages: []Message{{Role: RoleUser, Content: "Say hello in five words."}}, MaxTokens: ptr(32)}
				if _, err := g.Complete(ctx, OpChat, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
