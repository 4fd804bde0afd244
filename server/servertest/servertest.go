// Package servertest starts a real Switchboard server for tests: Echo and
// bbolt in t.TempDir() behind httptest, with an admin API key.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
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
	// Store is the server's database.
	Store *store.Bolt
	// Vault is the server's vault.
	Vault *vault.Vault
	// Config is the configuration the server runs with.
	Config config.Config
	// HTTP is the httptest server.
	HTTP *httptest.Server
}

// Option adjusts the configuration before the server starts.
type Option func(*config.Config)

// Logger is where test servers log; discard unless overridden by a test.
var Logger = slog.New(slog.NewTextHandler(io.Discard, nil))

// New starts a server for the duration of t.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	for _, o := range opts {
		o(&cfg)
	}
	st, err := store.OpenBolt(filepath.Join(cfg.DataDir, server.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(vault.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Config: cfg, Store: st, Vault: v, Logger: Logger})
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
