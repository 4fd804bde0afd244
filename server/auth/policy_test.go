package auth_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"openai/gpt-4o-mini", "openai/gpt-4o-mini", true},
		{"openai/gpt-4o-mini", "openai/gpt-4o", false},
		{"openai/gpt-4o", "openai/gpt-4o-mini", false},
		{"openai/*", "openai/gpt-4o-mini", true},
		{"openai/*", "openai/", true},
		{"openai/*", "openai", false},
		{"openai/*", "backup/openai/x", false},
		{"*/gpt-4o-mini", "backup/gpt-4o-mini", true},
		{"*/gpt-4o-mini", "gpt-4o-mini", false},
		{"*", "anything/at/all", true},
		{"*", "", true},
		{"", "", true},
		{"", "x", false},
		{"*mini", "openai/gpt-4o-mini", true},
		{"*/claude-*", "anthropic/claude-3-5-haiku", true},
		{"*/claude-*", "anthropic/claude", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "abbbc", true},
		{"a*b*c", "acb", false},
		{"a**b", "ab", true},
		{"*a*a*a*b", strings.Repeat("a", 60), false}, // backtracking stays bounded
		{"ollama/llama3.1:*", "ollama/llama3.1:8b", true},
		{"ollama/llama3.1:*", "ollama/llama3X1:8b", false}, // '.' is literal
		{"openai/?", "openai/x", false},                    // '?' is literal
		{"OpenAI/*", "openai/gpt", false},                  // case-sensitive
	}
	for _, tc := range tests {
		t.Run(tc.pattern+" vs "+tc.s, func(t *testing.T) {
			if got := auth.Glob(tc.pattern, tc.s); got != tc.want {
				t.Errorf("Glob(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
			}
		})
	}
}

// globRegexp translates a pattern to the regular expression it means.
func globRegexp(pattern string) *regexp.Regexp {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`^(?s:` + strings.Join(parts, ".*") + `)$`)
}

func FuzzGlob(f *testing.F) {
	for _, seed := range [][2]string{
		{"openai/*", "openai/gpt-4o-mini"}, {"*/gpt-4o-mini", "backup/gpt-4o-mini"}, {"a*b*c", "acb"},
		{"*", ""}, {"", "x"}, {"**a", "a"}, {"x.*", "x.y"}, {"*\n", "a\n"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		// The regexp works on runes; compare on valid UTF-8, as model ids are.
		if !utf8.ValidString(pattern) || !utf8.ValidString(s) {
			return
		}
		if got, want := auth.Glob(pattern, s), globRegexp(pattern).MatchString(s); got != want {
			t.Errorf("Glob(%q, %q) = %v, the regexp says %v", pattern, s, got, want)
		}
	})
}

func TestPolicyAllowsModel(t *testing.T) {
	tests := []struct {
		name   string
		models []string
		id     string
		want   bool
	}{
		{"no list allows every model", nil, "openai/gpt-4o-mini", true},
		{"an exact id", []string{"openai/gpt-4o-mini"}, "openai/gpt-4o-mini", true},
		{"an exact id is not a prefix", []string{"openai/gpt-4o"}, "openai/gpt-4o-mini", false},
		{"a provider pattern", []string{"openai/*"}, "openai/gpt-4o-mini", true},
		{"a provider pattern, other provider", []string{"openai/*"}, "azure/gpt-4o-mini", false},
		{"a name pattern", []string{"*/gpt-4o-mini"}, "azure/gpt-4o-mini", true},
		{"any entry of several", []string{"anthropic/*", "*/gpt-4o-mini"}, "openai/gpt-4o-mini", true},
		{"none of several", []string{"anthropic/*", "*/gpt-4o"}, "openai/gpt-4o-mini", false},
		{"an empty list allows nothing", []string{}, "openai/gpt-4o-mini", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &auth.Policy{Models: tc.models}
			if got := p.AllowsModel(tc.id); got != tc.want {
				t.Errorf("AllowsModel(%q) with %q = %v, want %v", tc.id, tc.models, got, tc.want)
			}
		})
	}
	t.Run("a nil policy allows every model", func(t *testing.T) {
		if !(*auth.Policy)(nil).AllowsModel("openai/x") {
			t.Error("nil policy refused a model")
		}
	})
}

func TestPolicyAllowsAction(t *testing.T) {
	tests := []struct {
		name              string
		connectors        []string
		connector, action string
		want              bool
	}{
		{"no list allows every action", nil, "github", "list_issues", true},
		{"a connector name allows its actions", []string{"github"}, "github", "list_issues", true},
		{"a connector name allows no other connector", []string{"github"}, "gitlab", "list_issues", false},
		{"a connector name is not a prefix", []string{"git"}, "github", "list_issues", false},
		{"a pair allows that action", []string{"github.list_issues"}, "github", "list_issues", true},
		{"a pair allows no other action", []string{"github.list_issues"}, "github", "create_issue", false},
		{"a pair allows no other connector", []string{"github.list_issues"}, "gitlab", "list_issues", false},
		{"an action name is not a prefix", []string{"github.list"}, "github", "list_issues", false},
		{"pairs and names combine", []string{"github.list_issues", "slack"}, "slack", "post", true},
		{"an empty list allows nothing", []string{}, "github", "list_issues", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &auth.Policy{Connectors: tc.connectors}
			if got := p.AllowsAction(tc.connector, tc.action); got != tc.want {
				t.Errorf("AllowsAction(%q, %q) with %q = %v, want %v", tc.connector, tc.action, tc.connectors, got, tc.want)
			}
		})
	}
}

func TestPolicyProblems(t *testing.T) {
	many := make([]string, auth.MaxPolicyEntries+1)
	for i := range many {
		many[i] = "p/m" + strings.Repeat("x", i)
	}
	tests := []struct {
		name   string
		policy auth.Policy
		want   []string // problem fields, in order
	}{
		{"the zero policy is valid", auth.Policy{}, nil},
		{"a full policy is valid", auth.Policy{
			RateLimit:  &auth.RateLimit{RequestsPerMinute: 10},
			Models:     []string{"openai/*", "*/claude-*", "*", "local/hash-embed-384"},
			Connectors: []string{"github", "slack.post_message"},
			Budget:     &auth.Budget{USD: 12.5, Period: auth.PeriodWeek, AlertAt: []float64{0.5, 0.8, 0.95}},
		}, nil},
		{"an empty models list", auth.Policy{Models: []string{}}, []string{"models"}},
		{"an empty model", auth.Policy{Models: []string{""}}, []string{"models[0]"}},
		{"a duplicate model", auth.Policy{Models: []string{"a/b", "c/*", "a/b"}}, []string{"models[2]"}},
		{"wildcards only", auth.Policy{Models: []string{"**"}}, []string{"models[0]"}},
		{"a space", auth.Policy{Models: []string{"openai/gpt 4"}}, []string{"models[0]"}},
		{"a control character", auth.Policy{Models: []string{"openai/gpt\x00"}}, []string{"models[0]"}},
		{"a too long model", auth.Policy{Models: []string{strings.Repeat("m", auth.MaxModelPattern+1)}}, []string{"models[0]"}},
		{"too many models", auth.Policy{Models: many}, []string{"models"}},
		{"an empty connectors list", auth.Policy{Connectors: []string{}}, []string{"connectors"}},
		{"an upper-case connector", auth.Policy{Connectors: []string{"GitHub"}}, []string{"connectors[0]"}},
		{"two dots", auth.Policy{Connectors: []string{"github.issues.list"}}, []string{"connectors[0]"}},
		{"a trailing dot", auth.Policy{Connectors: []string{"github."}}, []string{"connectors[0]"}},
		{"a wildcard connector", auth.Policy{Connectors: []string{"github.*"}}, []string{"connectors[0]"}},
		{"a duplicate connector", auth.Policy{Connectors: []string{"github", "github"}}, []string{"connectors[1]"}},
		{"a zero budget", auth.Policy{Budget: &auth.Budget{USD: 0, Period: auth.PeriodDay}}, []string{"budget.usd"}},
		{"a negative budget", auth.Policy{Budget: &auth.Budget{USD: -1, Period: auth.PeriodDay}}, []string{"budget.usd"}},
		{"a huge budget", auth.Policy{Budget: &auth.Budget{USD: auth.MaxBudgetUSD + 1, Period: auth.PeriodDay}}, []string{"budget.usd"}},
		{"an unknown period", auth.Policy{Budget: &auth.Budget{USD: 1, Period: "year"}}, []string{"budget.period"}},
		{"no period", auth.Policy{Budget: &auth.Budget{USD: 1}}, []string{"budget.period"}},
		{"alertAt not ascending", auth.Policy{Budget: &auth.Budget{USD: 1, Period: auth.PeriodMonth, AlertAt: []float64{0.8, 0.5}}}, []string{"budget.alertAt[1]"}},
		{"alertAt repeated", auth.Policy{Budget: &auth.Budget{USD: 1, Period: auth.PeriodMonth, AlertAt: []float64{0.5, 0.5}}}, []string{"budget.alertAt[1]"}},
		{"alertAt of 0 and 1", auth.Policy{Budget: &auth.Budget{USD: 1, Period: auth.PeriodTotal, AlertAt: []float64{0, 1}}}, []string{"budget.alertAt[0]", "budget.alertAt[1]"}},
		{"too many alerts", auth.Policy{Budget: &auth.Budget{USD: 1, Period: auth.PeriodDay, AlertAt: []float64{.1, .2, .3, .4, .5, .6, .7, .8, .9, .91, .92}}}, []string{"budget.alertAt"}},
		{"every problem at once", auth.Policy{
			RateLimit:  &auth.RateLimit{RequestsPerMinute: -1},
			Models:     []string{},
			Connectors: []string{"a.b.c"},
			Budget:     &auth.Budget{USD: 0, Period: "hour"},
		}, []string{"rateLimit.requestsPerMinute", "models", "connectors[0]", "budget.usd", "budget.period"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range tc.policy.Problems() {
				got = append(got, p.Field)
				if p.Problem == "" {
					t.Errorf("problem on %s says nothing", p.Field)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems on %v, want %v (%v)", got, tc.want, tc.policy.Problems())
			}
		})
	}
	t.Run("a nil policy has no problems", func(t *testing.T) {
		if ps := (*auth.Policy)(nil).Problems(); ps != nil {
			t.Errorf("%v", ps)
		}
	})
}

func TestPolicyNormalizedCopies(t *testing.T) {
	p := auth.Policy{RateLimit: &auth.RateLimit{}, Models: []string{"a/*"}, Connectors: []string{"c"}, Budget: &auth.Budget{USD: 1, Period: auth.PeriodDay, AlertAt: []float64{0.5}}}
	n := p.Normalized()
	p.Models[0], p.Connectors[0], p.Budget.AlertAt[0], p.Budget.USD = "x", "y", 0.9, 7
	if n.RateLimit != nil || n.Models[0] != "a/*" || n.Connectors[0] != "c" || n.Budget.AlertAt[0] != 0.5 || n.Budget.USD != 1 {
		t.Errorf("normalized %+v shares memory with the input or keeps an empty rate limit", n)
	}
}

func TestNotAllowedErrors(t *testing.T) {
	p := &auth.Principal{ID: "key_1", Policy: auth.Policy{Models: []string{"openai/*"}, Connectors: []string{"github"}}}
	err := auth.ModelNotAllowed(p, "backup/gpt")
	if errs.KindOf(err) != errs.Forbidden || !strings.Contains(err.Error(), "backup/gpt") || !strings.Contains(err.Error(), "openai/*") {
		t.Errorf("ModelNotAllowed = %v (%s)", err, errs.KindOf(err))
	}
	err = auth.ActionNotAllowed(p, "slack", "post")
	if errs.KindOf(err) != errs.Forbidden || !strings.Contains(err.Error(), "slack.post") || !strings.Contains(err.Error(), "github") {
		t.Errorf("ActionNotAllowed = %v (%s)", err, errs.KindOf(err))
	}
}

func TestBudgetWindow(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	since := at("2024-01-10T08:00:00Z")
	tests := []struct {
		name, period, now string
		start, end        string // end "" for never
	}{
		{"a day starts at UTC midnight", auth.PeriodDay, "2024-03-05T15:04:05Z", "2024-03-05T00:00:00Z", "2024-03-06T00:00:00Z"},
		{"a day at midnight exactly", auth.PeriodDay, "2024-03-05T00:00:00Z", "2024-03-05T00:00:00Z", "2024-03-06T00:00:00Z"},
		{"a day is UTC whatever the zone of now", auth.PeriodDay, "2024-03-05T23:30:00-05:00", "2024-03-06T00:00:00Z", "2024-03-07T00:00:00Z"},
		{"a day across a year", auth.PeriodDay, "2024-12-31T23:59:59Z", "2024-12-31T00:00:00Z", "2025-01-01T00:00:00Z"},
		{"a week starts on Monday (on a Wednesday)", auth.PeriodWeek, "2024-03-06T12:00:00Z", "2024-03-04T00:00:00Z", "2024-03-11T00:00:00Z"},
		{"a week on its Monday", auth.PeriodWeek, "2024-03-04T00:00:00Z", "2024-03-04T00:00:00Z", "2024-03-11T00:00:00Z"},
		{"a week on its Sunday", auth.PeriodWeek, "2024-03-10T23:59:59Z", "2024-03-04T00:00:00Z", "2024-03-11T00:00:00Z"},
		{"a week across months", auth.PeriodWeek, "2024-03-01T10:00:00Z", "2024-02-26T00:00:00Z", "2024-03-04T00:00:00Z"},
		{"a week across years (ISO week 1 of 2025)", auth.PeriodWeek, "2025-01-01T10:00:00Z", "2024-12-30T00:00:00Z", "2025-01-06T00:00:00Z"},
		{"a month starts on the 1st", auth.PeriodMonth, "2024-03-31T23:59:59Z", "2024-03-01T00:00:00Z", "2024-04-01T00:00:00Z"},
		{"a leap February", auth.PeriodMonth, "2024-02-29T12:00:00Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"December ends with the year", auth.PeriodMonth, "2024-12-15T00:00:00Z", "2024-12-01T00:00:00Z", "2025-01-01T00:00:00Z"},
		{"a month on its first instant", auth.PeriodMonth, "2024-05-01T00:00:00Z", "2024-05-01T00:00:00Z", "2024-06-01T00:00:00Z"},
		{"total runs from since and never ends", auth.PeriodTotal, "2030-06-01T00:00:00Z", "2024-01-10T08:00:00Z", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &auth.Budget{USD: 1, Period: tc.period}
			now := at(tc.now)
			start, end := b.Window(now, since)
			if !start.Equal(at(tc.start)) || start.Location() != time.UTC {
				t.Errorf("start = %v, want %s UTC", start, tc.start)
			}
			if tc.end == "" {
				if !end.IsZero() {
					t.Errorf("end = %v, want zero (never)", end)
				}
				return
			}
			if !end.Equal(at(tc.end)) {
				t.Errorf("end = %v, want %s", end, tc.end)
			}
			if now.Before(start) || !now.Before(end) {
				t.Errorf("now %v is outside [%v, %v)", now, start, end)
			}
			if tc.period == auth.PeriodWeek && start.Weekday() != time.Monday {
				t.Errorf("a week starts on %v", start.Weekday())
			}
		})
	}
}
