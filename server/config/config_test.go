package config_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// setting describes one configuration value and where it can come from;
// an empty flag or file means the source does not offer it.
type setting struct {
	name          string
	flag          string // "-addr=..." with the flag's value
	env, envValue string
	file          string // YAML with the file's value
	get           func(config.Config) string
	def           string
	fromFlag      string
	fromEnv       string
	fromFile      string
}

var settings = []setting{
	{name: "addr", flag: "-addr=127.0.0.1:9003", env: "SWITCHBOARD_ADDR", envValue: "127.0.0.1:9002", file: "addr: 127.0.0.1:9001",
		get: func(c config.Config) string { return c.Addr }, def: "127.0.0.1:8080", fromFlag: "127.0.0.1:9003", fromEnv: "127.0.0.1:9002", fromFile: "127.0.0.1:9001"},
	{name: "dataDir", flag: "-data-dir=/flag", env: "SWITCHBOARD_DATA_DIR", envValue: "/env", file: "dataDir: /file",
		get: func(c config.Config) string { return c.DataDir }, def: "./data", fromFlag: "/flag", fromEnv: "/env", fromFile: "/file"},
	{name: "publicUrl", flag: "-public-url=https://flag.example", env: "SWITCHBOARD_PUBLIC_URL", envValue: "https://env.example", file: "publicUrl: https://file.example",
		get: func(c config.Config) string { return c.PublicURL }, def: "", fromFlag: "https://flag.example", fromEnv: "https://env.example", fromFile: "https://file.example"},
	{name: "logLevel", flag: "-log-level=error", env: "SWITCHBOARD_LOG_LEVEL", envValue: "warn", file: "logLevel: debug",
		get: func(c config.Config) string { return c.LogLevel }, def: "info", fromFlag: "error", fromEnv: "warn", fromFile: "debug"},
	{name: "shutdownTimeout", flag: "-shutdown-timeout=3s", env: "SWITCHBOARD_SHUTDOWN_TIMEOUT", envValue: "2s", file: "shutdownTimeout: 1s",
		get: func(c config.Config) string { return c.ShutdownTimeout.D().String() }, def: "15s", fromFlag: "3s", fromEnv: "2s", fromFile: "1s"},
	{name: "readHeaderTimeout", flag: "-read-header-timeout=3s", env: "SWITCHBOARD_READ_HEADER_TIMEOUT", envValue: "2s", file: "readHeaderTimeout: 1s",
		get: func(c config.Config) string { return c.ReadHeaderTimeout.D().String() }, def: "10s", fromFlag: "3s", fromEnv: "2s", fromFile: "1s"},
	{name: "readTimeout", flag: "-read-timeout=30s", env: "SWITCHBOARD_READ_TIMEOUT", envValue: "20s", file: "readTimeout: 15s",
		get: func(c config.Config) string { return c.ReadTimeout.D().String() }, def: "1m0s", fromFlag: "30s", fromEnv: "20s", fromFile: "15s"},
	{name: "idleTimeout", flag: "-idle-timeout=3s", env: "SWITCHBOARD_IDLE_TIMEOUT", envValue: "2s", file: "idleTimeout: 1s",
		get: func(c config.Config) string { return c.IdleTimeout.D().String() }, def: "2m0s", fromFlag: "3s", fromEnv: "2s", fromFile: "1s"},
	{name: "maxConnections", flag: "-max-connections=300", env: "SWITCHBOARD_MAX_CONNECTIONS", envValue: "200", file: "maxConnections: 100",
		get: func(c config.Config) string { return fmt.Sprint(c.MaxConnections) }, def: "0", fromFlag: "300", fromEnv: "200", fromFile: "100"},
	{name: "egress.allow", flag: "-egress-allow=10.3.0.0/16", env: "SWITCHBOARD_EGRESS_ALLOW", envValue: "10.2.0.0/16, 10.22.0.0/16", file: "egress: {allow: [10.1.0.0/16]}",
		get: func(c config.Config) string { return fmt.Sprint(c.Egress.Allow) }, def: "[]", fromFlag: "[10.3.0.0/16]", fromEnv: "[10.2.0.0/16 10.22.0.0/16]", fromFile: "[10.1.0.0/16]"},
	{name: "limits.bodyBytes", flag: "-body-limit=3000", env: "SWITCHBOARD_BODY_LIMIT", envValue: "2000", file: "limits: {bodyBytes: 1000}",
		get: func(c config.Config) string { return fmt.Sprint(c.Limits.BodyBytes) }, def: "1048576", fromFlag: "3000", fromEnv: "2000", fromFile: "1000"},
	{name: "limits.requestsPerMinute", env: "SWITCHBOARD_REQUESTS_PER_MINUTE", envValue: "20", file: "limits: {requestsPerMinute: 10}",
		get: func(c config.Config) string { return fmt.Sprint(c.Limits.RequestsPerMinute) }, def: "600", fromEnv: "20", fromFile: "10"},
	{name: "limits.tokensPerMinute", env: "SWITCHBOARD_TOKENS_PER_MINUTE", envValue: "200", file: "limits: {tokensPerMinute: 100}",
		get: func(c config.Config) string { return fmt.Sprint(c.Limits.TokensPerMinute) }, def: "200000", fromEnv: "200", fromFile: "100"},
	{name: "limits.controlPlaneRequestsPerMinute", env: "SWITCHBOARD_CONTROL_PLANE_REQUESTS_PER_MINUTE", envValue: "300", file: "limits: {controlPlaneRequestsPerMinute: 30}",
		get: func(c config.Config) string { return fmt.Sprint(c.Limits.ControlPlaneRequestsPerMinute) }, def: "6000", fromEnv: "300", fromFile: "30"},
	{name: "masterKey", flag: "-master-key=flagkey", env: "SWITCHBOARD_MASTER_KEY", envValue: "envkey",
		get: func(c config.Config) string { return c.MasterKey }, def: "", fromFlag: "flagkey", fromEnv: "envkey"},
	{name: "masterKeySource", flag: "-master-key=flagkey", env: "SWITCHBOARD_MASTER_KEY", envValue: "envkey",
		get: func(c config.Config) string { return c.MasterKeySource }, def: "", fromFlag: "-master-key", fromEnv: "SWITCHBOARD_MASTER_KEY"},
	{name: "adminKey", env: "SWITCHBOARD_ADMIN_KEY", envValue: "sb_env",
		get: func(c config.Config) string { return c.AdminKey }, def: "", fromEnv: "sb_env"},
}

func TestPrecedence(t *testing.T) {
	type sources struct{ flag, env, file bool }
	for _, s := range settings {
		t.Run(s.name, func(t *testing.T) {
			type tc struct {
				name string
				src  sources
				want string
			}
			cases := []tc{{"default", sources{}, s.def}}
			if s.file != "" {
				cases = append(cases, tc{"file over default", sources{file: true}, s.fromFile})
				cases = append(cases, tc{"env over file", sources{env: true, file: true}, s.fromEnv})
			} else {
				cases = append(cases, tc{"env over default", sources{env: true}, s.fromEnv})
			}
			if s.flag != "" {
				cases = append(cases, tc{"flag over env and file", sources{flag: true, env: true, file: s.file != ""}, s.fromFlag})
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					var args []string
					env := map[string]string{}
					if c.src.flag {
						args = append(args, s.flag)
					}
					if c.src.env {
						env[s.env] = s.envValue
					}
					if c.src.file {
						env["SWITCHBOARD_CONFIG"] = writeFile(t, s.file+"\n")
					}
					cfg, err := config.Load(args, envOf(env))
					if err != nil {
						t.Fatal(err)
					}
					if got := s.get(cfg); got != c.want {
						t.Errorf("%s = %q, want %q", s.name, got, c.want)
					}
				})
			}
		})
	}
}

func TestSecretsAreNotReadFromTheFile(t *testing.T) {
	for _, key := range []string{"masterKey", "adminKey", "MasterKey"} {
		path := writeFile(t, key+": c2VjcmV0\n")
		_, err := config.Load(nil, envOf(map[string]string{"SWITCHBOARD_CONFIG": path}))
		if err == nil || !strings.Contains(err.Error(), "unknown key") {
			t.Errorf("%s in the config file: %v, want it refused as an unknown key", key, err)
		}
	}
}

func TestConfigFileFlagOverEnv(t *testing.T) {
	fromFlag := writeFile(t, "addr: 127.0.0.1:1111\n")
	fromEnv := writeFile(t, "addr: 127.0.0.1:2222\n")
	c, err := config.Load([]string{"-config", fromFlag}, envOf(map[string]string{"SWITCHBOARD_CONFIG": fromEnv}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:1111" {
		t.Errorf("addr = %s: -config must win over SWITCHBOARD_CONFIG", c.Addr)
	}
}

func TestFullFile(t *testing.T) {
	path := writeFile(t, `
addr: 0.0.0.0:9000
dataDir: /var/lib/switchboard
publicUrl: https://switchboard.example.com
egress:
  allow: [10.20.0.0/16]
limits:
  bodyBytes: 2048
  requestsPerMinute: 60
  tokensPerMinute: 1000
providers:
  - name: openai
    type: openai
    baseUrl: https://api.openai.com/v1
    apiKeyEnv: OPENAI_API_KEY
    timeout: 60s
    models:
      - name: gpt-4o-mini
        capabilities: [chat, code]
        maxTokens: 128000
        pricing: {input: 0.15, output: 0.60, cachedInput: 0.075}
        fallbacks: [anthropic/claude-3-5-haiku]
  - name: ollama
    type: openai
    baseUrl: http://127.0.0.1:11434/v1
    discover: true
`)
	c, err := config.Load(nil, envOf(map[string]string{"SWITCHBOARD_CONFIG": path}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "0.0.0.0:9000" || c.Limits.BodyBytes != 2048 || len(c.Providers) != 2 ||
		c.Providers[0].Timeout.D() != time.Minute || c.Providers[0].Models[0].Pricing.Output != 0.60 || !c.Providers[1].Discover ||
		c.Providers[0].Models[0].Pricing.CachedInput == nil || *c.Providers[0].Models[0].Pricing.CachedInput != 0.075 {
		t.Errorf("design.md's example file loaded as %+v", c)
	}
	// Untouched settings keep their defaults.
	if c.LogLevel != "info" || c.ShutdownTimeout.D() != 15*time.Second || c.Redis.Prefetch.D() != time.Second {
		t.Errorf("defaults lost: %+v", c)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want []string
	}{
		{name: "unknown top-level key", file: "adress: x\n", want: []string{"line 1", `unknown key "adress"`, "addr", "dataDir"}},
		{name: "unknown nested key", file: "limits:\n  bodyByts: 5\n", want: []string{"line 2", `unknown key "bodyByts"`, "bodyBytes"}},
		{name: "unknown key in a list item", file: "providers:\n  - name: a\n    kind: openai\n", want: []string{"line 3", `unknown key "kind"`, "type", "baseUrl"}},
		{name: "wrong type", file: "limits: {bodyBytes: lots}\n", want: []string{"line 1", "lots"}},
		{name: "bad duration", file: "shutdownTimeout: soon\n", want: []string{"line 1", "soon"}},
		{name: "not YAML", file: "addr: [\n", want: []string{"config file"}},
		{name: "missing file", env: map[string]string{"SWITCHBOARD_CONFIG": "/nonexistent/switchboard.yaml"}, want: []string{"config file", "/nonexistent/switchboard.yaml"}},
		{name: "bad env number", env: map[string]string{"SWITCHBOARD_BODY_LIMIT": "1MB"}, want: []string{"SWITCHBOARD_BODY_LIMIT"}},
		{name: "bad env duration", env: map[string]string{"SWITCHBOARD_SHUTDOWN_TIMEOUT": "10"}, want: []string{"SWITCHBOARD_SHUTDOWN_TIMEOUT"}},
		{name: "unknown flag", args: []string{"-adress=x"}, want: []string{"adress", "-addr"}},
		{name: "stray argument", args: []string{"extra"}, want: []string{`unexpected argument "extra"`}},
		{name: "invalid values", args: []string{"-body-limit=0", "-log-level=loud", "-shutdown-timeout=0s", "-addr="}, want: []string{"limits.bodyBytes", "logLevel", "shutdownTimeout", "addr is empty"}},
		{name: "unbounded connection timeouts", args: []string{"-read-header-timeout=0s", "-read-timeout=0s", "-idle-timeout=0s"},
			want: []string{"readHeaderTimeout must be positive", "readTimeout must be positive", "idleTimeout must be positive"}},
		{name: "read timeout shorter than the header timeout", env: map[string]string{"SWITCHBOARD_READ_TIMEOUT": "5s", "SWITCHBOARD_READ_HEADER_TIMEOUT": "10s"},
			want: []string{"readTimeout must be at least readHeaderTimeout"}},
		{name: "negative connection bound", env: map[string]string{"SWITCHBOARD_MAX_CONNECTIONS": "-1"}, want: []string{"maxConnections"}},
		{name: "redis settings", file: "redis: {url: 'http://cache:6379', failMode: ajar, timeout: 0s, prefetch: -1s}\n",
			want: []string{"redis.url must be a Redis URL", `redis.failMode "ajar"`, "redis.timeout must be positive", "redis.prefetch -1s must be between 0"}},
		{name: "prefetch over a minute", env: map[string]string{"SWITCHBOARD_REDIS_PREFETCH": "2m"}, want: []string{"redis.prefetch 2m0s"}},
		{name: "negative limits", file: "limits: {requestsPerMinute: -1}\nconnectors: {maxTimeout: -1s, retries: -2, transformTimeout: -5ms}\n",
			want: []string{"limits.requestsPerMinute must not be negative", "connectors.maxTimeout", "connectors.retries", "connectors.transformTimeout"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range tc.env {
				env[k] = v
			}
			if tc.file != "" {
				env["SWITCHBOARD_CONFIG"] = writeFile(t, tc.file)
			}
			_, err := config.Load(tc.args, envOf(env))
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "config.") {
				t.Errorf("error names Go types: %q", err)
			}
		})
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	c, err := config.Load(nil, envOf(map[string]string{"SWITCHBOARD_CONFIG": writeFile(t, "# nothing yet\n")}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != config.Default().Addr {
		t.Errorf("addr = %s", c.Addr)
	}
}

func TestHelpFlagIsAFlagErrorWithTheUsage(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		t.Run(arg, func(t *testing.T) {
			_, err := config.Load([]string{arg}, envOf(nil))
			var fe *config.FlagError
			if !errors.As(err, &fe) || !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("Load(%s) = %v, want a FlagError wrapping flag.ErrHelp", arg, err)
			}
			for _, f := range []string{"-addr", "-idle-timeout", "-max-connections", "SWITCHBOARD_SHUTDOWN_TIMEOUT"} {
				if !strings.Contains(fe.Usage, f) {
					t.Errorf("usage lacks %s:\n%s", f, fe.Usage)
				}
			}
		})
	}
}
