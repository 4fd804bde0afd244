package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
)

func loadWebhooksYAML(t *testing.T, yaml string) (config.Config, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load([]string{"-config", p}, func(string) string { return "" })
}

func TestWebhooksConfig(t *testing.T) {
	d := config.Default().Webhooks
	if d.AttemptTimeout.D() != 15*time.Second || len(d.RetrySchedule) != 7 || d.RetrySchedule[6].D() != 10*time.Hour ||
		d.DisableAfter.D() != 120*time.Hour || d.SecretGracePeriod.D() != 24*time.Hour || d.MaxEvents != 10000 || d.Concurrency != 32 {
		t.Errorf("defaults = %+v", d)
	}
	c, err := loadWebhooksYAML(t, "webhooks:\n  attemptTimeout: 3s\n  retrySchedule: [1s, 2m]\n  disableAfter: 48h\n  retention: 1h\n  maxEvents: 50\n")
	if err != nil {
		t.Fatal(err)
	}
	w := c.Webhooks
	if w.AttemptTimeout.D() != 3*time.Second || !slices.Equal(w.RetrySchedule, []config.Duration{config.Duration(time.Second), config.Duration(2 * time.Minute)}) ||
		w.DisableAfter.D() != 48*time.Hour || w.Retention.D() != time.Hour || w.MaxEvents != 50 || w.SecretGracePeriod.D() != 24*time.Hour {
		t.Errorf("loaded = %+v", w)
	}
	for _, tt := range []struct{ name, yaml, want string }{
		{"negative delay", "webhooks:\n  retrySchedule: [1s, -1s]\n", "webhooks.retrySchedule[1] must be positive"},
		{"zero delay", "webhooks:\n  retrySchedule: [0s]\n", "webhooks.retrySchedule[0] must be positive"},
		{"negative events", "webhooks:\n  maxEvents: -1\n", "webhooks.maxEvents must be positive"},
		{"unknown key", "webhooks:\n  retries: 3\n", `unknown key "retries"`},
		{"bad duration", "webhooks:\n  attemptTimeout: soon\n", "soon"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadWebhooksYAML(t, tt.yaml)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
