// Package config loads Switchboard's settings from defaults, an optional
// YAML file, SWITCHBOARD_* environment variables and command-line flags,
// each overriding the one before.
package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the whole server configuration. YAML keys are camelCase like the API.
type Config struct {
	// Addr is the listen address.
	Addr string `yaml:"addr"`
	// DataDir holds switchboard.db and, when generated, master.key.
	DataDir string `yaml:"dataDir"`
	// MasterKey is the base64 vault key; from SWITCHBOARD_MASTER_KEY or
	// the -master-key flag, never from the file.
	MasterKey string `yaml:"-"`
	// MasterKeySource names where MasterKey came from (the flag or the
	// environment variable), for error messages.
	MasterKeySource string `yaml:"-"`
	// AdminKey is a bootstrap admin API key; from SWITCHBOARD_ADMIN_KEY only.
	AdminKey string `yaml:"-"`
	// PublicURL is the externally reachable base URL (OAuth callbacks).
	PublicURL string `yaml:"publicUrl"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"logLevel"`
	// ShutdownTimeout bounds the wait for in-flight requests on shutdown.
	ShutdownTimeout Duration `yaml:"shutdownTimeout"`
	// ReadHeaderTimeout bounds the time to read a request's headers, from
	// the first byte (or, on a new connection, from the connection).
	ReadHeaderTimeout Duration `yaml:"readHeaderTimeout"`
	// ReadTimeout bounds the time to read a whole request, headers and
	// body. Responses (streams, slow upstreams) are not bounded by it.
	ReadTimeout Duration `yaml:"readTimeout"`
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request.
	IdleTimeout Duration `yaml:"idleTimeout"`
	// MaxConnections bounds the open client connections; 0 means half the
	// process's open-file limit, at most DefaultMaxConnections.
	MaxConnections int `yaml:"maxConnections"`

	// Database selects the store: bbolt in DataDir (the default) or PostgreSQL.
	Database Database `yaml:"database"`
	// Redis, when set, shares rate limits and budgets across replicas.
	Redis Redis `yaml:"redis"`

	Egress     Egress     `yaml:"egress"`
	Limits     Limits     `yaml:"limits"`
	Connectors Connectors `yaml:"connectors"`
	Providers  []Provider `yaml:"providers"`
	// OAuth configures issued access tokens and accepted external issuers.
	OAuth OAuth `yaml:"oauth"`
	// Metrics configures GET /metrics.
	Metrics Metrics `yaml:"metrics"`
	// Webhooks configures webhook delivery and the event log.
	Webhooks Webhooks `yaml:"webhooks"`
	// Responses configures the responses /openai/v1/responses stores.
	Responses Responses `yaml:"responses"`
}

// Egress configures the outgoing-request guard.
type Egress struct {
	// Allow lists CIDR ranges that may be reached despite being special-purpose.
	Allow []string `yaml:"allow"`
}

// Limits bounds what callers may send and consume.
type Limits struct {
	BodyBytes int64 `yaml:"bodyBytes"`
	// RequestsPerMinute and TokensPerMinute bound each credential on the
	// data plane (models and actions); a key's rateLimit overrides them.
	RequestsPerMinute int `yaml:"requestsPerMinute"`
	TokensPerMinute   int `yaml:"tokensPerMinute"`
	// ControlPlaneRequestsPerMinute bounds each credential on the control
	// plane (connectors, actions, connections, webhooks, keys, clients).
	ControlPlaneRequestsPerMinute int `yaml:"controlPlaneRequestsPerMinute"`
}

// Connectors configures action invocation.
type Connectors struct {
	// DefaultTimeout applies to actions without timeoutMs.
	DefaultTimeout Duration `yaml:"defaultTimeout"`
	// MaxTimeout caps any action's timeoutMs.
	MaxTimeout Duration `yaml:"maxTimeout"`
	// MaxResponseBytes caps an upstream response body.
	MaxResponseBytes int64 `yaml:"maxResponseBytes"`
	// Retries is how often an idempotent call is retried on 429/502/503/504.
	Retries int `yaml:"retries"`
	// MaxRetryAfter caps how long a Retry-After is honoured.
	MaxRetryAfter Duration `yaml:"maxRetryAfter"`
	// TransformTimeout is a transformation's wall-clock limit.
	TransformTimeout Duration `yaml:"transformTimeout"`
	// TransformMaxOutputBytes caps a transformation's JSON result.
	TransformMaxOutputBytes int64 `yaml:"transformMaxOutputBytes"`
	// TransformMaxMemoryBytes bounds the heap growth a transformation may cause.
	TransformMaxMemoryBytes int64 `yaml:"transformMaxMemoryBytes"`
	// InvocationLogSize is how many invocations are kept per connector.
	InvocationLogSize int `yaml:"invocationLogSize"`
	// OAuthRefreshSkew is how long before expiry an OAuth 2.0 connection's
	// access token is refreshed (default 60s; 0 means the default).
	OAuthRefreshSkew Duration `yaml:"oauthRefreshSkew"`
}

// Provider is one language-model provider.
type Provider struct {
	Name      string   `yaml:"name"`
	Type      string   `yaml:"type"`
	BaseURL   string   `yaml:"baseUrl"`
	APIKeyEnv string   `yaml:"apiKeyEnv"`
	Timeout   Duration `yaml:"timeout"`
	Discover  bool     `yaml:"discover"`
	Models    []Model  `yaml:"models"`
	// CircuitBreaker decides when the provider counts as down and is
	// skipped (its models' fallbacks answer instead).
	CircuitBreaker CircuitBreaker `yaml:"circuitBreaker"`
}

// CircuitBreaker configures a provider's circuit breaker: after Threshold
// consecutive failures that mean the provider is down (5xx, connection
// errors, timeouts; not 4xx or 429) its models are skipped for Cooldown,
// then one trial call decides whether it is back. Zero fields take the
// defaults (5 failures, 30s); a negative Threshold turns the breaker off.
type CircuitBreaker struct {
	Threshold int      `yaml:"threshold"`
	Cooldown  Duration `yaml:"cooldown"`
}

// Model is one model of a provider.
type Model struct {
	Name         string   `yaml:"name"`
	Capabilities []string `yaml:"capabilities"`
	MaxTokens    int      `yaml:"maxTokens"`
	Dimensions   int      `yaml:"dimensions"`
	Pricing      *Pricing `yaml:"pricing"`
	Fallbacks    []string `yaml:"fallbacks"`
}

// Pricing is USD per million tokens.
type Pricing struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
	// CachedInput prices the prompt tokens the provider served from its
	// prompt cache; Input when nil.
	CachedInput *float64 `yaml:"cachedInput"`
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Database selects where Switchboard keeps its data.
type Database struct {
	// URL is a PostgreSQL connection URL (postgres://…); empty keeps the
	// embedded bbolt database in DataDir. From SWITCHBOARD_DATABASE_URL
	// or database.url; it may hold a password, so it is never logged.
	URL string `yaml:"url"`
}

// Postgres reports whether the store is PostgreSQL.
func (d Database) Postgres() bool { return d.URL != "" }

// Redis configures the Redis server that shares limits across replicas.
type Redis struct {
	// URL is a Redis URL (redis://… or rediss://…); empty keeps limits in
	// each replica's memory. From SWITCHBOARD_REDIS_URL or redis.url.
	URL string `yaml:"url"`
	// FailMode is what limits do while Redis is unreachable: "open" (the
	// default: admit, log and count in a metric) or "closed" (refuse with
	// 503).
	FailMode string `yaml:"failMode"`
	// Timeout bounds each Redis call on the request path.
	Timeout Duration `yaml:"timeout"`
	// Prefetch is how much of each shared limit a replica takes ahead
	// from Redis and spends without a round trip, as a duration of the
	// limit's refill rate (1s of 600 requests per minute: up to 10); 0
	// sends every decision to Redis.
	Prefetch Duration `yaml:"prefetch"`
}

// Redis fail modes.
const (
	FailOpen   = "open"
	FailClosed = "closed"
)

// DefaultMaxConnections caps the automatic MaxConnections (0): at 10,000
// idle connections the server holds a few hundred MB of buffers.
const DefaultMaxConnections = 10000

// Default returns the built-in configuration.
func Default() Config {
	return Config{
		Addr:            "127.0.0.1:8080",
		DataDir:         "./data",
		LogLevel:        "info",
		ShutdownTimeout: Duration(15 * time.Second),
		// A 1 MiB body (the default limit) must arrive at 17 KB/s or more.
		ReadHeaderTimeout: Duration(10 * time.Second),
		ReadTimeout:       Duration(60 * time.Second),
		// Longer than the idle timeout of common client pools (Go: 90s),
		// so that the server rarely closes a connection a client reuses.
		IdleTimeout: Duration(120 * time.Second),
		Limits: Limits{
			BodyBytes:                     1 << 20,
			RequestsPerMinute:             600,
			TokensPerMinute:               200000,
			ControlPlaneRequestsPerMinute: 6000,
		},
		Connectors: Connectors{
			DefaultTimeout:          Duration(30 * time.Second),
			MaxTimeout:              Duration(120 * time.Second),
			MaxResponseBytes:        10 << 20,
			Retries:                 2,
			MaxRetryAfter:           Duration(10 * time.Second),
			TransformTimeout:        Duration(100 * time.Millisecond),
			TransformMaxOutputBytes: 1 << 20,
			TransformMaxMemoryBytes: 64 << 20,
			InvocationLogSize:       100,
			OAuthRefreshSkew:        Duration(60 * time.Second),
		},
		Redis:    Redis{FailMode: FailOpen, Timeout: Duration(250 * time.Millisecond), Prefetch: Duration(time.Second)},
		OAuth:    OAuth{TokenTTL: Duration(DefaultTokenTTL), Leeway: Duration(DefaultLeeway)},
		Webhooks: Webhooks{}.WithDefaults(),
	}
}

// FlagError is Load's error for wrong flags, or for -h and -help (then it
// wraps flag.ErrHelp): Usage lists the flags.
type FlagError struct {
	Err   error
	Usage string
}

func (e *FlagError) Error() string { return e.Err.Error() + "\nflags:\n" + e.Usage }
func (e *FlagError) Unwrap() error { return e.Err }

// Load builds the configuration from args (without the program and
// subcommand names) and the environment lookup getenv.
func Load(args []string, getenv func(string) string) (Config, error) {
	c := Default()
	// Flag defaults are shown by -h only: a flag's value is used when the
	// flag is given (fs.Visit below), so env and file win over them.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		fAddr    = fs.String("addr", c.Addr, "listen address (SWITCHBOARD_ADDR)")
		fData    = fs.String("data-dir", c.DataDir, "data directory (SWITCHBOARD_DATA_DIR)")
		fConfig  = fs.String("config", "", "config file (SWITCHBOARD_CONFIG)")
		fPublic  = fs.String("public-url", "", "public base URL (SWITCHBOARD_PUBLIC_URL)")
		fLog     = fs.String("log-level", c.LogLevel, "debug|info|warn|error (SWITCHBOARD_LOG_LEVEL)")
		fEgress  = fs.String("egress-allow", "", "comma-separated CIDRs the egress guard allows (SWITCHBOARD_EGRESS_ALLOW)")
		fBody    = fs.Int64("body-limit", c.Limits.BodyBytes, "max request body bytes (SWITCHBOARD_BODY_LIMIT)")
		fMasterK = fs.String("master-key", "", "base64 master key (prefer SWITCHBOARD_MASTER_KEY)")
		fStop    = fs.Duration("shutdown-timeout", c.ShutdownTimeout.D(), "bound on the wait for in-flight requests at shutdown (SWITCHBOARD_SHUTDOWN_TIMEOUT)")
		fHeader  = fs.Duration("read-header-timeout", c.ReadHeaderTimeout.D(), "bound on reading a request's headers (SWITCHBOARD_READ_HEADER_TIMEOUT)")
		fRead    = fs.Duration("read-timeout", c.ReadTimeout.D(), "bound on reading a whole request, headers and body; responses are not bounded (SWITCHBOARD_READ_TIMEOUT)")
		fIdle    = fs.Duration("idle-timeout", c.IdleTimeout.D(), "how long a keep-alive connection may wait for its next request (SWITCHBOARD_IDLE_TIMEOUT)")
		fConns   = fs.Int("max-connections", 0, "bound on open client connections; 0: half the open-file limit, at most 10000 (SWITCHBOARD_MAX_CONNECTIONS)")
	)
	if err := fs.Parse(args); err != nil {
		return c, &FlagError{Err: err, Usage: usage(fs)}
	}
	if fs.NArg() > 0 {
		return c, &FlagError{Err: fmt.Errorf("unexpected argument %q", fs.Arg(0)), Usage: usage(fs)}
	}

	path := first(*fConfig, getenv("SWITCHBOARD_CONFIG"))
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("config file: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return c, fmt.Errorf("config file %s: %w", path, explainYAML(err))
		}
	}

	envs := []struct {
		name string
		set  func(string) error
	}{
		{"SWITCHBOARD_ADDR", str(&c.Addr)},
		{"SWITCHBOARD_DATA_DIR", str(&c.DataDir)},
		{"SWITCHBOARD_MASTER_KEY", str(&c.MasterKey)},
		{"SWITCHBOARD_ADMIN_KEY", str(&c.AdminKey)},
		{"SWITCHBOARD_PUBLIC_URL", str(&c.PublicURL)},
		{"SWITCHBOARD_LOG_LEVEL", str(&c.LogLevel)},
		{"SWITCHBOARD_SHUTDOWN_TIMEOUT", dur(&c.ShutdownTimeout)},
		{"SWITCHBOARD_READ_HEADER_TIMEOUT", dur(&c.ReadHeaderTimeout)},
		{"SWITCHBOARD_READ_TIMEOUT", dur(&c.ReadTimeout)},
		{"SWITCHBOARD_IDLE_TIMEOUT", dur(&c.IdleTimeout)},
		{"SWITCHBOARD_MAX_CONNECTIONS", intv(&c.MaxConnections)},
		{"SWITCHBOARD_EGRESS_ALLOW", list(&c.Egress.Allow)},
		{"SWITCHBOARD_DATABASE_URL", str(&c.Database.URL)},
		{"SWITCHBOARD_REDIS_URL", str(&c.Redis.URL)},
		{"SWITCHBOARD_REDIS_FAIL_MODE", str(&c.Redis.FailMode)},
		{"SWITCHBOARD_REDIS_TIMEOUT", dur(&c.Redis.Timeout)},
		{"SWITCHBOARD_REDIS_PREFETCH", dur(&c.Redis.Prefetch)},
		{"SWITCHBOARD_OAUTH_REFRESH_SKEW", dur(&c.Connectors.OAuthRefreshSkew)},
		{"SWITCHBOARD_BODY_LIMIT", int64v(&c.Limits.BodyBytes)},
		{"SWITCHBOARD_REQUESTS_PER_MINUTE", intv(&c.Limits.RequestsPerMinute)},
		{"SWITCHBOARD_TOKENS_PER_MINUTE", intv(&c.Limits.TokensPerMinute)},
		{"SWITCHBOARD_CONTROL_PLANE_REQUESTS_PER_MINUTE", intv(&c.Limits.ControlPlaneRequestsPerMinute)},
	}
	for _, e := range envs {
		if v := getenv(e.name); v != "" {
			if err := e.set(v); err != nil {
				return c, fmt.Errorf("%s: %w", e.name, err)
			}
		}
	}

	if c.MasterKey != "" {
		c.MasterKeySource = "SWITCHBOARD_MASTER_KEY"
	}

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["addr"] {
		c.Addr = *fAddr
	}
	if set["data-dir"] {
		c.DataDir = *fData
	}
	if set["public-url"] {
		c.PublicURL = *fPublic
	}
	if set["log-level"] {
		c.LogLevel = *fLog
	}
	if set["egress-allow"] {
		_ = list(&c.Egress.Allow)(*fEgress)
	}
	if set["body-limit"] {
		c.Limits.BodyBytes = *fBody
	}
	if set["master-key"] {
		c.MasterKey, c.MasterKeySource = *fMasterK, "-master-key"
	}
	if set["shutdown-timeout"] {
		c.ShutdownTimeout = Duration(*fStop)
	}
	if set["read-header-timeout"] {
		c.ReadHeaderTimeout = Duration(*fHeader)
	}
	if set["read-timeout"] {
		c.ReadTimeout = Duration(*fRead)
	}
	if set["idle-timeout"] {
		c.IdleTimeout = Duration(*fIdle)
	}
	if set["max-connections"] {
		c.MaxConnections = *fConns
	}
	return c, c.Validate()
}

// Validate checks values that would otherwise fail later and obscurely.
func (c Config) Validate() error {
	var problems []string
	if c.Addr == "" {
		problems = append(problems, "addr is empty")
	}
	if c.DataDir == "" {
		problems = append(problems, "dataDir is empty")
	}
	if c.Limits.BodyBytes <= 0 {
		problems = append(problems, "limits.bodyBytes must be positive")
	}
	if c.ShutdownTimeout <= 0 {
		problems = append(problems, "shutdownTimeout must be positive")
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"readHeaderTimeout", c.ReadHeaderTimeout}, {"readTimeout", c.ReadTimeout}, {"idleTimeout", c.IdleTimeout}} {
		if d.v <= 0 {
			problems = append(problems, d.name+" must be positive (an unbounded wait lets idle clients hold connections forever)")
		}
	}
	if c.ReadTimeout > 0 && c.ReadTimeout < c.ReadHeaderTimeout {
		problems = append(problems, "readTimeout must be at least readHeaderTimeout (it bounds headers and body together)")
	}
	if c.MaxConnections < 0 {
		problems = append(problems, "maxConnections must be 0 (automatic) or positive")
	}
	cc := c.Connectors
	for _, n := range []struct {
		name string
		v    int64
	}{
		{"limits.requestsPerMinute", int64(c.Limits.RequestsPerMinute)}, {"limits.tokensPerMinute", int64(c.Limits.TokensPerMinute)},
		{"connectors.defaultTimeout", int64(cc.DefaultTimeout)}, {"connectors.maxTimeout", int64(cc.MaxTimeout)},
		{"connectors.maxResponseBytes", cc.MaxResponseBytes}, {"connectors.retries", int64(cc.Retries)},
		{"connectors.maxRetryAfter", int64(cc.MaxRetryAfter)}, {"connectors.transformTimeout", int64(cc.TransformTimeout)},
		{"connectors.transformMaxOutputBytes", cc.TransformMaxOutputBytes}, {"connectors.transformMaxMemoryBytes", cc.TransformMaxMemoryBytes},
		{"connectors.invocationLogSize", int64(cc.InvocationLogSize)},
	} {
		if n.v < 0 {
			problems = append(problems, n.name+" must not be negative")
		}
	}
	for i, p := range c.Providers {
		if p.CircuitBreaker.Cooldown < 0 {
			problems = append(problems, fmt.Sprintf("providers[%d].circuitBreaker.cooldown must not be negative", i))
		}
	}
	problems = append(problems, c.validateOAuth()...)
	problems = append(problems, c.validateWebhooks()...)
	problems = append(problems, c.validateResponses()...)
	if d := c.Connectors.OAuthRefreshSkew.D(); d < 0 || d > time.Hour {
		problems = append(problems, "connectors.oauthRefreshSkew must be between 0 and 1h")
	}
	problems = append(problems, c.validateStores()...)
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		problems = append(problems, fmt.Sprintf("logLevel %q is not one of debug, info, warn, error", c.LogLevel))
	}
	if len(problems) > 0 {
		return errors.New("invalid configuration: " + strings.Join(problems, "; "))
	}
	return nil
}

// validateStores checks the database and Redis settings. Errors never
// repeat a URL: it may hold a password.
func (c Config) validateStores() []string {
	var problems []string
	if u := c.Database.URL; u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "postgres" && pu.Scheme != "postgresql") {
			problems = append(problems, "database.url must be a PostgreSQL URL (postgres://user:password@host:5432/dbname)")
		}
	}
	if u := c.Redis.URL; u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "redis" && pu.Scheme != "rediss" && pu.Scheme != "unix") {
			problems = append(problems, "redis.url must be a Redis URL (redis://[:password@]host:6379/0, rediss:// for TLS)")
		}
	}
	switch c.Redis.FailMode {
	case FailOpen, FailClosed:
	default:
		problems = append(problems, fmt.Sprintf("redis.failMode %q is not one of open, closed", c.Redis.FailMode))
	}
	if c.Redis.Timeout <= 0 {
		problems = append(problems, "redis.timeout must be positive")
	}
	if p := time.Duration(c.Redis.Prefetch); p < 0 || p > time.Minute {
		problems = append(problems, fmt.Sprintf("redis.prefetch %v must be between 0 (every decision in Redis) and 1m", p))
	}
	return problems
}

func usage(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return b.String()
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func str(p *string) func(string) error { return func(v string) error { *p = v; return nil } }

func list(p *[]string) func(string) error {
	return func(v string) error {
		*p = nil
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				*p = append(*p, s)
			}
		}
		return nil
	}
}

func intv(p *int) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		*p = n
		return err
	}
}

func dur(p *Duration) func(string) error {
	return func(v string) error {
		d, err := time.ParseDuration(v)
		*p = Duration(d)
		return err
	}
}

// unknownField matches yaml.v3's "field x not found in type config.T".
var unknownField = regexp.MustCompile(`field (\S+) not found in type (\S+)`)

// explainYAML rewrites yaml.v3's unknown-field errors, which name Go types,
// into the config file's terms: the unknown key and the keys allowed there.
func explainYAML(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	known := map[string][]string{}
	yamlKeys(reflect.TypeFor[Config](), known)
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = unknownField.ReplaceAllStringFunc(m, func(s string) string {
			sub := unknownField.FindStringSubmatch(s)
			return fmt.Sprintf("unknown key %q (allowed here: %s)", sub[1], strings.Join(known[sub[2]], ", "))
		})
	}
	return errors.New(strings.Join(msgs, "; "))
}

// yamlKeys records, for each struct type reachable from t, its YAML keys.
func yamlKeys(t reflect.Type, out map[string][]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	if _, done := out[t.String()]; done {
		return
	}
	out[t.String()] = nil
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		keys = append(keys, name)
		yamlKeys(f.Type, out)
	}
	out[t.String()] = keys
}

func int64v(p *int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		*p = n
		return err
	}
}
