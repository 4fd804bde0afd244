package auth

import (
	"fmt"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// MaxPerMinute bounds a rate-limit override.
const MaxPerMinute = 1_000_000_000

// Problems lists what is wrong with an override sent at field (e.g.
// "rateLimit"); nil for a nil or valid override. Absent fields keep the
// default; a present one must be between 1 and MaxPerMinute.
func (r *RateLimit) Problems(field string) []errs.Problem {
	if r == nil {
		return nil
	}
	var ps []errs.Problem
	check := func(name string, v int) {
		if v < 0 || v > MaxPerMinute {
			ps = append(ps, errs.Problem{Field: field + "." + name, Problem: fmt.Sprintf("must be between 1 and %d, got %d", MaxPerMinute, v)})
		}
	}
	check("requestsPerMinute", r.RequestsPerMinute)
	check("tokensPerMinute", r.TokensPerMinute)
	return ps
}

// Normalize returns nil for an override that overrides nothing.
func (r *RateLimit) Normalize() *RateLimit {
	if r == nil || (r.RequestsPerMinute == 0 && r.TokensPerMinute == 0) {
		return nil
	}
	c := *r
	return &c
}
