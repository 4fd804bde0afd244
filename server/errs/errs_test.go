package errs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

func problems(n int) []errs.Problem {
	ps := make([]errs.Problem, n)
	for i := range ps {
		ps[i] = errs.Problem{Field: fmt.Sprintf("params.p%d", i), Problem: "unknown parameter"}
	}
	return ps
}

func TestProblems_ListAtMostMaxProblemsAndCountTheRest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		build   func([]errs.Problem) *errs.Error
		listed  int
		omitted int
	}{
		{"one, through Problems", 1, viaProblems, 1, 0},
		{"exactly the cap, through Problems", errs.MaxProblems, viaProblems, errs.MaxProblems, 0},
		{"one past the cap, through Problems", errs.MaxProblems + 1, viaProblems, errs.MaxProblems, 1},
		{"sixty thousand, through Problems", 60000, viaProblems, errs.MaxProblems, 60000 - errs.MaxProblems},
		{"sixty thousand, through WithDetails", 60000, viaDetails, errs.MaxProblems, 60000 - errs.MaxProblems},
		{"a few, through WithDetails", 3, viaDetails, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := problems(tc.n)
			e := tc.build(ps)
			listed, _ := e.Details["problems"].([]errs.Problem)
			if len(listed) != tc.listed || listed[0] != ps[0] {
				t.Fatalf("details.problems has %d, want %d starting with the first", len(listed), tc.listed)
			}
			omitted, has := e.Details["problemsOmitted"]
			switch {
			case tc.omitted == 0 && has:
				t.Fatalf("problemsOmitted = %v, want none", omitted)
			case tc.omitted > 0 && omitted != tc.omitted:
				t.Fatalf("problemsOmitted = %v, want %d", omitted, tc.omitted)
			}
			more := fmt.Sprintf("and %d more", tc.omitted)
			if strings.Contains(e.Message, more) != (tc.omitted > 0) {
				t.Fatalf("message %q, want %q only when problems are left out", e.Message, more)
			}
			if got := errs.ProblemsOf(e); len(got) != tc.n {
				t.Fatalf("ProblemsOf has %d, want all %d", len(got), tc.n)
			}
		})
	}
	if errs.Problems("nothing wrong", nil) != nil {
		t.Fatal("Problems with no problem is not nil")
	}
}

func viaProblems(ps []errs.Problem) *errs.Error {
	return errs.Problems("invalid connector", ps).(*errs.Error)
}

func viaDetails(ps []errs.Problem) *errs.Error {
	return errs.E(errs.Invalid, "params of weather.current have %d problems", len(ps)).
		WithDetails(map[string]any{"problems": ps, "connector": "weather"})
}
