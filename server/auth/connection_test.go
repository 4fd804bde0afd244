package auth_test

import (
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
)

func TestConnectionProblems(t *testing.T) {
	for _, tc := range []struct {
		name, connection string
		ok               bool
	}{
		{"unbound", "", true},
		{"default", "default", true},
		{"with dash and underscore", "user-42_a", true},
		{"leading digit", "42", true},
		{"64 characters", "u123456789012345678901234567890123456789012345678901234567890123", true},
		{"65 characters", "u1234567890123456789012345678901234567890123456789012345678901234", false},
		{"upper case", "User", false},
		{"leading dash", "-user", false},
		{"slash", "a/b", false},
		{"space", "a b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := auth.ConnectionProblems(tc.connection)
			if (len(ps) == 0) != tc.ok {
				t.Fatalf("ConnectionProblems(%q) = %v, want ok=%v", tc.connection, ps, tc.ok)
			}
			if !tc.ok && (len(ps) != 1 || ps[0].Field != "connection") {
				t.Errorf("problems = %v, want one on connection", ps)
			}
		})
	}
}
