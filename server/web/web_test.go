package web

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

func TestPolicy_FormActionListsOnlyTheGivenOrigins(t *testing.T) {
	tests := []struct {
		name    string
		targets []string
		want    string
	}{
		{"self only", nil, "form-action 'self';"},
		{"provider and application", []string{"https://auth.example/oauth/authorize?x=1", "http://127.0.0.1:9000/done"}, "form-action 'self' https://auth.example http://127.0.0.1:9000;"},
		{"empty and relative targets are left out", []string{"", "/done", "javascript:alert(1)"}, "form-action 'self';"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy(tt.targets...); !strings.Contains(got, tt.want) || !strings.Contains(got, "default-src 'none'") {
				t.Fatalf("policy %q lacks %q", got, tt.want)
			}
		})
	}
}

func TestReturnURL_CarriesTheOutcomeNotTheMessage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"connected", nil, "https://sb.example/connect/sessions/cs_1/return?outcome=connected"},
		{"denied", errs.E(errs.Forbidden, "consent was denied for secret-ish text"), "https://sb.example/connect/sessions/cs_1/return?code=forbidden&outcome=error"},
		{"unclassified", errors.New("boom"), "https://sb.example/connect/sessions/cs_1/return?code=internal&outcome=error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReturnURL("https://sb.example/connect/sessions/cs_1/return", tt.err); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCSRF_CheckNeedsTheCookieTheFieldAndTheSameOrigin(t *testing.T) {
	token := randomToken()
	tests := []struct {
		name, cookie, field, origin string
		ok                          bool
	}{
		{"matching", token, token, "", true},
		{"matching, same origin", token, token, "http://sb.example", true},
		{"no cookie", "", token, "", false},
		{"no field", token, "", "", false},
		{"another token", token, randomToken(), "", false},
		{"another origin", token, token, "https://evil.example", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://sb.example/connect/x", strings.NewReader("csrf="+tt.field))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tt.cookie != "" {
				r.Header.Set("Cookie", connectCSRF.name+"="+tt.cookie)
			}
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			err := connectCSRF.check(r)
			if (err == nil) != tt.ok {
				t.Fatalf("check: %v, want ok=%v", err, tt.ok)
			}
			if err != nil && errs.KindOf(err) != errs.Forbidden {
				t.Fatalf("kind %s, want forbidden", errs.KindOf(err))
			}
		})
	}
}
