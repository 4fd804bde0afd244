package server

import (
	"context"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/budget"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthserver"
)

// Budget returns the spend budget tracker (tests set its clock before the
// first request).
func (s *Server) Budget() *budget.Tracker { return s.budget }

// spend is the wire Spend of a credential; nil when it has no budget.
func (s *Server) spend(ctx context.Context, c budget.Credential) (*api.Spend, error) {
	sp, ok, err := s.budget.Spend(ctx, c)
	if err != nil || !ok {
		return nil, err
	}
	out := &api.Spend{Period: api.SpendPeriod(sp.Period), PeriodStart: sp.PeriodStart, BudgetUsd: sp.BudgetUSD,
		SpentUsd: sp.SpentUSD, RemainingUsd: sp.RemainingUSD()}
	if !sp.ResetAt.IsZero() {
		t := sp.ResetAt
		out.ResetAt = &t
	}
	return out, nil
}

// apiKeyWithSpend is toAPIKey with the key's spend filled.
func (s *Server) apiKeyWithSpend(ctx context.Context, k auth.APIKey) (api.APIKey, error) {
	out := toAPIKey(k)
	var err error
	out.Spend, err = s.spend(ctx, budget.Credential{ID: k.ID, Kind: auth.KindAPIKey, Name: k.Name, CreatedAt: k.CreatedAt, Budget: k.Budget})
	return out, err
}

// oauthClientWithSpend is toOAuthClient with the client's spend filled.
func (s *Server) oauthClientWithSpend(ctx context.Context, c oauthserver.Client) (api.OAuthClient, error) {
	out := toOAuthClient(c)
	var err error
	out.Spend, err = s.spend(ctx, budget.Credential{ID: c.ID, Kind: auth.KindOAuthToken, Name: c.Name, CreatedAt: c.CreatedAt, Budget: c.Budget})
	return out, err
}
