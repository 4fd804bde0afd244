// Package servertest starts a real Switchboard server for tests: Echo and
// bbolt in t.TempDir() behind httptest, with an admin API key, and clients
// that validate every exchange with it against the OpenAPI spec.
//
//	env := servertest.New(t)
//	c := env.Client(t)                          // generated client, admin key
//	res, err := c.ListAPIKeysWithResponse(ctx, nil)
//	raw := env.HTTPClient(t, servertest.WithKey(env.AdminKey)) // hand-made requests (SSE, ...)
//
// Every request and response through these clients is checked with
// kin-openapi (openapi3filter) against server/openapi.yaml: a request the
// spec does not allow, a response status the operation does not declare, a
// body that does not match its schema, an error that is not an
// ErrorResponse or a response without X-Request-Id fails the test. The
// operations exercised are recorded for the whole test binary (Unexercised).
package servertest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/pgtest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redistest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store/storetest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// Env is a running test server.
type Env struct {
	// URL is the server's base URL.
	URL string
	// AdminKey is an API key with the admin scope.
	AdminKey string
	// Server is the control plane behind URL.
	Server *server.Server
	// Store is the server's database: bbolt, or PostgreSQL with
	// SWITCHBOARD_TEST_STORE=postgres.
	Store store.Store
	// Vault is the server's vault.
	Vault *vault.Vault
	// Config is the configuration the server runs with.
	Config config.Config
	// HTTP is the httptest server; nil for an Env built around a server
	// started otherwise (e.g. server.Run), which needs only URL.
	HTTP *httptest.Server
}

// Option adjusts the configuration before the server starts.
type Option func(*config.Config)

// WithRedis shares the server's rate limits and budgets in the Redis at
// url (redistest.Server.URL), as replicas do.
func WithRedis(url string) Option {
	return func(c *config.Config) { c.Redis.URL = url }
}

// RedisEnv names the environment variable that runs every Env on its own
// real Redis (redistest) unless an Option chose one: with
// SWITCHBOARD_TEST_REDIS=1 the contract tests check the shared limiter and
// budget ledger instead of the in-memory ones.
const RedisEnv = "SWITCHBOARD_TEST_REDIS"

// StoreEnv names the environment variable that runs every Env on a fresh
// PostgreSQL database (pgtest) instead of bbolt in t.TempDir():
// SWITCHBOARD_TEST_STORE=postgres runs the contract tests on the
// PostgreSQL store.
const StoreEnv = "SWITCHBOARD_TEST_STORE"

// Logger is where test servers log; discard unless overridden by a test.
var Logger = slog.New(slog.NewTextHandler(io.Discard, nil))

// New starts a server for the duration of t.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	return NewWithLogger(t, Logger, opts...)
}

// NewWithLogger starts a server for the duration of t that logs to log.
func NewWithLogger(t testing.TB, log *slog.Logger, opts ...Option) *Env {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Redis.URL == "" && os.Getenv(RedisEnv) == "1" {
		cfg.Redis.URL = redistest.New(t).URL()
	}
	switch b := os.Getenv(StoreEnv); b {
	case "", "bbolt":
	case "postgres":
		if cfg.Database.URL == "" {
			cfg.Database.URL = pgtest.NewDatabase(t)
		}
	default:
		t.Fatalf("%s=%q: want bbolt or postgres", StoreEnv, b)
	}
	st, err := server.OpenStore(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	masterKey := vault.NewKey()
	if cfg.MasterKey != "" {
		// Replicas in one test share their database and master key.
		if masterKey, err = vault.ParseKey(cfg.MasterKey); err != nil {
			t.Fatal(err)
		}
	}
	v, err := vault.New(masterKey)
	if err != nil {
		t.Fatal(err)
	}
	// Every transaction runs as after serialization failures (failing at
	// its first write, then rolled back at its end, then committed), so
	// that no domain code depends on running once: PostgreSQL reruns them.
	srv, err := server.New(server.Options{Config: cfg, Store: storetest.Retried(st), Vault: v, Logger: log})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	_, key, err := srv.Keys().Create(context.Background(), auth.NewAPIKeyInput{Name: "test-admin", Scopes: []string{auth.ScopeAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close(context.Background())
		_ = st.Close()
	})
	return &Env{URL: hs.URL, AdminKey: key, Server: srv, Store: st, Vault: v, Config: cfg, HTTP: hs}
}

// StoredBytes returns everything the database holds as it is stored: the
// bbolt file, or every bucket, key and value of the PostgreSQL table; for
// tests that check what reaches the disk (secrets must be sealed).
func (e *Env) StoredBytes(t testing.TB) []byte {
	t.Helper()
	if !e.Config.Database.Postgres() {
		b, err := os.ReadFile(filepath.Join(e.Config.DataDir, server.DBFile))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	conn, err := pgx.Connect(context.Background(), e.Config.Database.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), "SELECT bucket, key, value FROM kv")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for rows.Next() {
		var b string
		var k, v []byte
		if err := rows.Scan(&b, &k, &v); err != nil {
			t.Fatal(err)
		}
		out.WriteString(b)
		out.Write(k)
		out.Write(v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// Client returns the generated client authenticated with the admin key;
// every exchange is validated against the spec.
func (e *Env) Client(t testing.TB) *client.ClientWithResponses {
	t.Helper()
	return e.ClientWithKey(t, e.AdminKey)
}

// ClientWithKey returns the generated client sending key as the bearer
// credential (none when key is ""); every exchange is validated.
func (e *Env) ClientWithKey(t testing.TB, key string) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(e.URL, client.WithHTTPClient(e.HTTPClient(t, WithKey(key))))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// HTTPClient returns a plain *http.Client whose transport validates every
// exchange with the server against the spec, for requests the generated
// client cannot make (streams, hand-registered routes, malformed input).
// It sends no credential unless WithKey is given.
func (e *Env) HTTPClient(t testing.TB, opts ...TransportOption) *http.Client {
	t.Helper()
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	var base http.RoundTripper = http.DefaultTransport
	if e.HTTP != nil {
		base = e.HTTP.Client().Transport
	}
	v := &validatingTransport{t: t, base: base, host: u.Host}
	for _, o := range opts {
		o(v)
	}
	return &http.Client{Transport: v}
}
