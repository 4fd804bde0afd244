package config

import (
	"strings"
	"testing"
	"time"
)

func TestOAuthRefreshSkew(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		want      time.Duration
		err       string
	}{
		{"default", "", 60 * time.Second, ""},
		{"from env", "2m", 2 * time.Minute, ""},
		{"negative", "-1s", 0, "connectors.oauthRefreshSkew must be between 0 and 1h"},
		{"too long", "2h", 0, "connectors.oauthRefreshSkew must be between 0 and 1h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"SWITCHBOARD_OAUTH_REFRESH_SKEW": tc.env}
			c, err := Load(nil, func(k string) string { return env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Connectors.OAuthRefreshSkew.D(); got != tc.want {
				t.Fatalf("skew = %s, want %s", got, tc.want)
			}
		})
	}
}
