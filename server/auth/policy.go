package auth

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// Policy is what a credential (API key or OAuth client) may do beyond its
// scopes: its rate limits, the models and connectors it may use, and its
// spend budget. The zero Policy restricts nothing.
type Policy struct {
	// RateLimit overrides the configured per-credential limits.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// Models lists the model ids or patterns (`*` matches any run of
	// characters) the credential may use; nil for every model.
	Models []string `json:"models,omitempty"`
	// Connectors lists the connectors ("github") or actions
	// ("github.list_issues") the credential may run; nil for every one.
	Connectors []string `json:"connectors,omitempty"`
	// Budget caps the credential's model spend per period; nil for none.
	Budget *Budget `json:"budget,omitempty"`
}

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodWeek  = "week"
	PeriodMonth = "month"
	PeriodTotal = "total"
)

// Periods lists the budget periods.
var Periods = []string{PeriodDay, PeriodWeek, PeriodMonth, PeriodTotal}

// Budget is a spend limit in USD per period.
type Budget struct {
	// USD is the most the credential may spend per period.
	USD float64 `json:"usd"`
	// Period is day, week (ISO, from Monday), month (UTC calendar) or total.
	Period string `json:"period"`
	// AlertAt lists ascending fractions of USD at which an alert is recorded.
	AlertAt []float64 `json:"alertAt,omitempty"`
}

// Limits on a policy's lists.
const (
	MaxPolicyEntries  = 100
	MaxModelPattern   = 256
	MaxBudgetUSD      = 1_000_000_000
	MaxBudgetAlerts   = 10
	connectorEntryMax = 129
)

// connectorEntryRE is a connector name, optionally followed by "." and an
// action name (both as server/connectors.NamePattern).
var connectorEntryRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}(\.[a-z][a-z0-9_]{0,63})?$`)

// Problems lists every invalid field of p, named as on the wire
// ("models[2]", "budget.usd").
func (p *Policy) Problems() []errs.Problem {
	if p == nil {
		return nil
	}
	ps := p.RateLimit.Problems("rateLimit")
	ps = append(ps, listProblems("models", p.Models, "model id or pattern such as openai/* (omit models to allow every model)", func(s string) string {
		switch {
		case len(s) > MaxModelPattern:
			return fmt.Sprintf("must be at most %d characters", MaxModelPattern)
		case strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			return "must not contain spaces or control characters"
		case strings.Trim(s, "*") == "" && s != "*":
			return "must name more than wildcards"
		}
		return ""
	})...)
	ps = append(ps, listProblems("connectors", p.Connectors, "connector name or connector.action pair (omit connectors to allow every connector)", func(s string) string {
		if len(s) > connectorEntryMax || !connectorEntryRE.MatchString(s) {
			return "must be a connector name (github) or a connector.action pair (github.list_issues), lower case"
		}
		return ""
	})...)
	if b := p.Budget; b != nil {
		if !(b.USD > 0) || b.USD > MaxBudgetUSD {
			ps = append(ps, errs.Problem{Field: "budget.usd", Problem: fmt.Sprintf("must be more than 0 and at most %d", MaxBudgetUSD)})
		}
		if !slices.Contains(Periods, b.Period) {
			ps = append(ps, errs.Problem{Field: "budget.period", Problem: fmt.Sprintf("must be one of %s, got %q", strings.Join(Periods, ", "), b.Period)})
		}
		if len(b.AlertAt) > MaxBudgetAlerts {
			ps = append(ps, errs.Problem{Field: "budget.alertAt", Problem: fmt.Sprintf("at most %d fractions, got %d", MaxBudgetAlerts, len(b.AlertAt))})
		}
		for i, a := range b.AlertAt {
			f := "budget.alertAt[" + strconv.Itoa(i) + "]"
			switch {
			case !(a > 0 && a < 1):
				ps = append(ps, errs.Problem{Field: f, Problem: fmt.Sprintf("must be a fraction between 0 and 1 exclusive (0.8 for 80%%), got %v", a)})
			case i > 0 && a <= b.AlertAt[i-1]:
				ps = append(ps, errs.Problem{Field: f, Problem: "fractions must be strictly ascending"})
			}
		}
	}
	return ps
}

// listProblems checks an allow-list: absent is fine, empty is not, and each
// entry must be unique and pass check (which returns "" when it does).
func listProblems(field string, list []string, what string, check func(string) string) []errs.Problem {
	if list == nil {
		return nil
	}
	var ps []errs.Problem
	if len(list) == 0 {
		return []errs.Problem{{Field: field, Problem: "must list at least one " + what}}
	}
	if len(list) > MaxPolicyEntries {
		ps = append(ps, errs.Problem{Field: field, Problem: fmt.Sprintf("at most %d entries, got %d", MaxPolicyEntries, len(list))})
	}
	seen := make(map[string]bool, len(list))
	for i, s := range list {
		f := field + "[" + strconv.Itoa(i) + "]"
		switch {
		case s == "":
			ps = append(ps, errs.Problem{Field: f, Problem: "must not be empty"})
		case seen[s]:
			ps = append(ps, errs.Problem{Field: f, Problem: "duplicate entry " + strconv.Quote(s)})
		default:
			if msg := check(s); msg != "" {
				ps = append(ps, errs.Problem{Field: f, Problem: msg})
			}
		}
		seen[s] = true
	}
	return ps
}

// Normalized returns p with an empty rate limit dropped and its slices
// copied, ready to store.
func (p Policy) Normalized() Policy {
	p.RateLimit = p.RateLimit.Normalize()
	p.Models = slices.Clone(p.Models)
	p.Connectors = slices.Clone(p.Connectors)
	if p.Budget != nil {
		b := *p.Budget
		b.AlertAt = slices.Clone(b.AlertAt)
		p.Budget = &b
	}
	return p
}

// AllowsModel reports whether the policy lets the credential use the
// catalog model id.
func (p *Policy) AllowsModel(id string) bool {
	if p == nil || p.Models == nil {
		return true
	}
	for _, pat := range p.Models {
		if Glob(pat, id) {
			return true
		}
	}
	return false
}

// AllowsAction reports whether the policy lets the credential run action
// of connector.
func (p *Policy) AllowsAction(connector, action string) bool {
	if p == nil || p.Connectors == nil {
		return true
	}
	for _, e := range p.Connectors {
		c, a, ok := strings.Cut(e, ".")
		if c == connector && (!ok || a == action) {
			return true
		}
	}
	return false
}

// ModelNotAllowed is the 403 for a model outside the caller's policy.
func ModelNotAllowed(p *Principal, model string) error {
	return errs.E(errs.Forbidden, "credential %s may not use model %s; its policy allows %s", p.ID, model, strings.Join(p.Models, ", ")).
		WithDetails(map[string]any{"model": model, "allowedModels": p.Models})
}

// ActionNotAllowed is the 403 for an action outside the caller's policy.
func ActionNotAllowed(p *Principal, connector, action string) error {
	return errs.E(errs.Forbidden, "credential %s may not run %s.%s; its policy allows %s", p.ID, connector, action, strings.Join(p.Connectors, ", ")).
		WithDetails(map[string]any{"connector": connector, "action": action, "allowedConnectors": p.Connectors})
}

// Glob reports whether s matches pattern, where '*' matches any run of
// characters ('/' included) and every other character only itself.
func Glob(pattern, s string) bool {
	// Iterative matching with one backtrack point: linear in practice,
	// O(len(pattern)*len(s)) at worst.
	px, sx := 0, 0
	star, match := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pattern) && pattern[px] == '*':
			star, match = px, sx
			px++
		case px < len(pattern) && pattern[px] == s[sx]:
			px++
			sx++
		case star >= 0:
			match++
			px, sx = star+1, match
		default:
			return false
		}
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}

// Window returns the budget period holding now: [start, end). For total,
// start is since and end is zero (it never ends).
func (b *Budget) Window(now, since time.Time) (start, end time.Time) {
	now = now.UTC()
	y, m, d := now.Date()
	switch b.Period {
	case PeriodDay:
		start = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 1)
	case PeriodWeek:
		back := (int(now.Weekday()) + 6) % 7 // days since Monday
		start = time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 7)
	case PeriodMonth:
		start = time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	return since.UTC(), time.Time{}
}
