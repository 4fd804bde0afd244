package llm

import (
	"context"
	"errors"
)

// TokenCounter is implemented by providers that count a request's input
// tokens themselves (Anthropic's count_tokens).
type TokenCounter interface {
	// CountTokens returns the input tokens r would take on m.
	CountTokens(ctx context.Context, m *Model, r *Request) (int, error)
}

// TokenCount is the answer of CountTokens.
type TokenCount struct {
	// Model is the model the count is for.
	Model *Model
	// InputTokens is the prompt's token count.
	InputTokens int
	// Estimated is true when Switchboard counted with its own tokenizer
	// (the provider has no count of its own, or it failed).
	Estimated bool
}

// CountTokens validates r for op as Complete would and counts its input
// tokens: with the provider's own count when it has one (Anthropic), else
// with Switchboard's tokenizer, as it estimates usage. Nothing is recorded
// and no budget is spent. It fails as Complete's validation does (422, 404,
// 403, 400 for a field the provider cannot carry); a failing upstream
// count falls back to the estimate, unless the caller went away.
func (g *Gateway) CountTokens(ctx context.Context, op Op, r *Request) (*TokenCount, error) {
	m, err := g.prepare(ctx, op, r)
	if err != nil {
		return nil, err
	}
	if tc, ok := m.provider.(TokenCounter); ok {
		n, err := tc.CountTokens(ctx, m, r)
		if err == nil {
			return &TokenCount{Model: m, InputTokens: n}, nil
		}
		if errors.Is(err, ErrClientGone) || ctx.Err() != nil {
			return nil, err
		}
		g.log().DebugContext(ctx, "provider token count failed; estimating", "model", m.ID, "error", err.Error())
	}
	return &TokenCount{Model: m, InputTokens: estimatePromptTokens(m.Name, r), Estimated: true}, nil
}
