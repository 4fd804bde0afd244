package server

import (
	"context"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/usage"
)

func (h *handlers) GetUsage(ctx context.Context, req api.GetUsageRequestObject) (api.GetUsageResponseObject, error) {
	p := auth.FromContext(ctx)
	prm := req.Params
	q := usage.Query{GroupBy: []string{usage.GroupModel}}
	if prm.GroupBy != nil {
		q.GroupBy = q.GroupBy[:0]
		for _, g := range *prm.GroupBy {
			q.GroupBy = append(q.GroupBy, string(g))
		}
	}
	if prm.From != nil {
		from := prm.From.UTC().Truncate(time.Hour)
		q.From = from
	}
	if prm.To != nil {
		q.To = prm.To.UTC()
	}
	if prm.Model != nil {
		q.Model = *prm.Model
	}
	// Admins see everyone; any other credential only itself.
	switch {
	case p.Has(auth.ScopeAdmin):
		if prm.Key != nil {
			q.PrincipalID = *prm.Key
		}
	case prm.Key != nil && *prm.Key != p.ID:
		return nil, errs.E(errs.Forbidden, "only credentials with the admin scope may read the usage of another credential").
			WithDetails(map[string]any{"requiredScopes": []string{auth.ScopeAdmin}})
	default:
		q.PrincipalID = p.ID
	}
	rows, err := h.s.usage.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	out := api.GetUsage200JSONResponse{Data: make([]api.UsageRow, 0, len(rows)), GroupBy: make([]api.UsageGroupBy, 0, len(q.GroupBy))}
	for _, g := range q.GroupBy {
		out.GroupBy = append(out.GroupBy, api.UsageGroupBy(g))
	}
	if !q.From.IsZero() {
		out.From = &q.From
	}
	if !q.To.IsZero() {
		out.To = &q.To
	}
	for _, r := range rows {
		if r.Requests == 0 && len(q.GroupBy) == 0 {
			continue // the empty sum Query returns for no usage
		}
		row := api.UsageRow{Requests: r.Requests, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
			TotalTokens: r.TotalTokens, CostUsd: r.CostUSD}
		if r.PrincipalID != "" {
			row.Key = &r.PrincipalID
		}
		if r.Model != "" {
			row.Model = &r.Model
		}
		if !r.Period.IsZero() {
			row.Period = &r.Period
		}
		out.Data = append(out.Data, row)
		out.Total.Requests += r.Requests
		out.Total.PromptTokens += r.PromptTokens
		out.Total.CompletionTokens += r.CompletionTokens
		out.Total.TotalTokens += r.TotalTokens
		out.Total.CostUsd = usage.AddUSD(out.Total.CostUsd, r.CostUSD)
	}
	return out, nil
}
