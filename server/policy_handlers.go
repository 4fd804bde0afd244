package server

import (
	"slices"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/api"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
)

// policyFromAPI translates the policy fields of a key or client body.
func policyFromAPI(rl *api.RateLimitOverride, models *api.ModelPolicy, connectors *api.ConnectorPolicy, b *api.Budget) auth.Policy {
	p := auth.Policy{RateLimit: fromRateLimit(rl)}
	if models != nil {
		p.Models = append([]string{}, *models...)
	}
	if connectors != nil {
		p.Connectors = append([]string{}, *connectors...)
	}
	if b != nil {
		p.Budget = &auth.Budget{USD: b.Usd, Period: string(b.Period)}
		if b.AlertAt != nil {
			p.Budget.AlertAt = slices.Clone(*b.AlertAt)
		}
	}
	return p
}

// toAPIPolicy is the wire form of a stored policy.
func toAPIPolicy(p auth.Policy) (*api.RateLimitOverride, *api.ModelPolicy, *api.ConnectorPolicy, *api.Budget) {
	var (
		models, connectors *[]string
		budget             *api.Budget
	)
	if p.Models != nil {
		m := slices.Clone(p.Models)
		models = &m
	}
	if p.Connectors != nil {
		c := slices.Clone(p.Connectors)
		connectors = &c
	}
	if b := p.Budget; b != nil {
		budget = &api.Budget{Usd: b.USD, Period: api.BudgetPeriod(b.Period)}
		if b.AlertAt != nil {
			a := slices.Clone(b.AlertAt)
			budget.AlertAt = &a
		}
	}
	return toRateLimit(p.RateLimit), models, connectors, budget
}

// fromRateLimit and toRateLimit translate the optional rateLimit override.
func fromRateLimit(r *api.RateLimitOverride) *auth.RateLimit {
	if r == nil {
		return nil
	}
	var out auth.RateLimit
	if r.RequestsPerMinute != nil {
		out.RequestsPerMinute = *r.RequestsPerMinute
		if out.RequestsPerMinute == 0 {
			out.RequestsPerMinute = -1 // explicit 0 is out of range, not "default"
		}
	}
	if r.TokensPerMinute != nil {
		out.TokensPerMinute = *r.TokensPerMinute
		if out.TokensPerMinute == 0 {
			out.TokensPerMinute = -1
		}
	}
	return &out
}

func toRateLimit(r *auth.RateLimit) *api.RateLimitOverride {
	if r == nil {
		return nil
	}
	var out api.RateLimitOverride
	if r.RequestsPerMinute > 0 {
		n := r.RequestsPerMinute
		out.RequestsPerMinute = &n
	}
	if r.TokensPerMinute > 0 {
		n := r.TokensPerMinute
		out.TokensPerMinute = &n
	}
	return &out
}
