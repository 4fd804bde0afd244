package llm

import (
	"context"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
)

// allow refuses a model outside the policy of the caller in ctx:
// auth.ModelNotAllowed (403). Without a caller (in-process use) or without
// a models list, every model is allowed.
func allow(ctx context.Context, m *Model) error {
	p := auth.FromContext(ctx)
	if p == nil || p.AllowsModel(m.ID) {
		return nil
	}
	return auth.ModelNotAllowed(p, m.ID)
}

// Allowed keeps the models the caller in ctx may use, in order; models
// itself when the caller's policy allows every model.
func Allowed(ctx context.Context, models []*Model) []*Model {
	p := auth.FromContext(ctx)
	if p == nil || p.Models == nil {
		return models
	}
	out := make([]*Model, 0, len(models))
	for _, m := range models {
		if p.AllowsModel(m.ID) {
			out = append(out, m)
		}
	}
	return out
}

// Model returns the catalog model id for the caller in ctx: 404 when the
// catalog has no such model, 403 (auth.ModelNotAllowed) when the caller's
// policy does not allow it. With resolve, a bare model name served by one
// provider is accepted as Catalog.Resolve does.
func (g *Gateway) Model(ctx context.Context, id string, resolve bool) (*Model, error) {
	lookup := g.Catalog.Lookup
	if resolve {
		lookup = g.Catalog.Resolve
	}
	m, err := lookup(id)
	if err != nil {
		return nil, err
	}
	if err := allow(ctx, m); err != nil {
		return nil, err
	}
	return m, nil
}
