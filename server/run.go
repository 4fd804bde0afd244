package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/egress"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/llm"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// DBFile is the database file name inside the data dir.
const DBFile = "switchboard.db"

// OpenStore opens the store of cfg: PostgreSQL when database.url is set
// (its schema created or upgraded under a lock), else the bbolt database
// in the data dir, failing fast when another process holds it. It logs
// which one, never the URL's password.
func OpenStore(ctx context.Context, cfg config.Config, log *slog.Logger) (store.Store, error) {
	return openStore(ctx, cfg, log, false)
}

// openStore is OpenStore; serving marks a replica (see
// store.PostgresOptions.Serving).
func openStore(ctx context.Context, cfg config.Config, log *slog.Logger, serving bool) (store.Store, error) {
	if cfg.Database.Postgres() {
		st, err := store.OpenPostgres(ctx, cfg.Database.URL, store.PostgresOptions{Logger: log, Serving: serving})
		if err != nil {
			return nil, err
		}
		log.Info("store: PostgreSQL", "database", store.RedactURL(cfg.Database.URL))
		return st, nil
	}
	path := filepath.Join(cfg.DataDir, DBFile)
	st, err := store.OpenBolt(path)
	if errors.Is(err, store.ErrInUse) {
		return nil, fmt.Errorf("%w (%s): stop the other switchboard using %s first, or run replicas on PostgreSQL (SWITCHBOARD_DATABASE_URL, docs/deploy.md)", store.ErrInUse, path, cfg.DataDir)
	}
	if err != nil {
		return nil, err
	}
	log.Info("store: bbolt", "path", path)
	return st, nil
}

// OpenVault builds the vault from the configured master key
// (SWITCHBOARD_MASTER_KEY or -master-key) or the key file in the data dir
// (generated, with a warning, when absent). A key left in master.key.next
// by an interrupted rotation is accepted for opening too.
func OpenVault(cfg config.Config, log *slog.Logger) (*vault.Vault, error) {
	var key []byte
	if cfg.MasterKey != "" {
		k, err := parseMasterKey(cfg)
		if err != nil {
			return nil, err
		}
		key = k
	} else {
		k, created, err := vault.LoadOrCreateKeyFile(cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("master key: %w", err)
		}
		if created {
			log.Warn("generated a new master key; production deployments must pass SWITCHBOARD_MASTER_KEY and keep it safe: losing it loses every stored secret",
				"path", filepath.Join(cfg.DataDir, vault.KeyFile), "keyId", vault.KeyID(k))
		}
		key = k
	}
	var extra [][]byte
	if b, err := os.ReadFile(filepath.Join(cfg.DataDir, vault.KeyFile+".next")); err == nil {
		if k, err := vault.ParseKey(string(b)); err == nil {
			extra = append(extra, k)
		}
	}
	return vault.New(key, extra...)
}

// parseMasterKey parses cfg's master key; an error names the source the
// key came from (the flag or the environment variable), never the key.
func parseMasterKey(cfg config.Config) ([]byte, error) {
	k, err := vault.ParseKey(cfg.MasterKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmp.Or(cfg.MasterKeySource, "SWITCHBOARD_MASTER_KEY"), err)
	}
	return k, nil
}

// Check refuses a configuration that New, Run or Bootstrap would refuse,
// without touching the data dir: Run calls it before it creates anything
// there (the database, a generated master key). It checks cfg.Validate,
// the master and admin keys, the egress allow-list and the providers.
func Check(cfg config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.MasterKey != "" {
		if _, err := parseMasterKey(cfg); err != nil {
			return err
		}
	}
	if cfg.AdminKey != "" {
		if err := auth.CheckSecret(cfg.AdminKey); err != nil {
			return fmt.Errorf("SWITCHBOARD_ADMIN_KEY: %w", err)
		}
	}
	if _, err := egress.New(cfg.Egress.Allow); err != nil {
		return err
	}
	// Without a store the catalog neither reads nor writes anything.
	quiet := slog.New(slog.DiscardHandler)
	if _, err := llm.NewCatalog(context.Background(), cfg.Providers, llm.CatalogOptions{Logger: quiet}); err != nil {
		return err
	}
	return nil
}

// Bootstrap makes sure an admin credential exists: the SWITCHBOARD_ADMIN_KEY
// one when given (replicas starting together create it once), else a
// generated key printed once to out on first start.
func Bootstrap(ctx context.Context, keys *auth.Keys, adminKey string, out io.Writer) error {
	if adminKey != "" {
		if _, err := keys.Authenticate(ctx, adminKey); err == nil {
			return nil
		}
		_, _, err := keys.Create(ctx, auth.NewAPIKeyInput{Name: "bootstrap-admin", Scopes: []string{auth.ScopeAdmin}, Secret: adminKey})
		if errors.Is(err, errs.Conflict) {
			// Replicas starting together: another one created it first.
			if _, aerr := keys.Authenticate(ctx, adminKey); aerr == nil {
				return nil
			}
		}
		if err != nil {
			return fmt.Errorf("SWITCHBOARD_ADMIN_KEY: %w", err)
		}
		return nil
	}
	n, err := keys.Count(ctx)
	if err != nil || n > 0 {
		return err
	}
	_, secret, err := keys.Create(ctx, auth.NewAPIKeyInput{Name: "bootstrap-admin", Scopes: []string{auth.ScopeAdmin}})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n  Bootstrap admin API key (shown once, store it now):\n\n    %s\n\n", secret)
	return nil
}

// Run serves the control plane until ctx is cancelled, then stops accepting,
// finishes in-flight requests (bounded by cfg.ShutdownTimeout), stops the
// background workers and closes the store. The bootstrap admin key, when
// one is generated, is printed to out.
//
// An invalid configuration (Check) is refused before anything is written
// to the data dir, and a busy port before a master key is generated.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, out io.Writer) (err error) {
	if err := Check(cfg); err != nil {
		return err
	}
	st, err := openStore(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	// Listen before opening the vault (a busy port generates no master
	// key) and before bootstrapping (it prints no bootstrap key).
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	limited := newConnLimiter(ln, maxConnections(cfg), log)
	defer limited.Close()
	v, err := OpenVault(cfg, log)
	if err != nil {
		return err
	}
	srv, err := New(Options{Config: cfg, Store: st, Vault: v, Logger: log})
	if err != nil {
		return err
	}
	// Workers get their own bounded time to flush, after the HTTP drain.
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.D())
		defer cancel()
		err = errors.Join(err, srv.Close(cctx))
	}()
	if err := Bootstrap(ctx, srv.Keys(), cfg.AdminKey, out); err != nil {
		return err
	}
	hs := newHTTPServer(cfg, srv, limited, log)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(limited) }()
	log.Info("switchboard listening", "addr", ln.Addr().String(), "replica", srv.Leases().Owner(), "dataDir", cfg.DataDir, "keyId", v.CurrentKeyID(),
		"maxConnections", cap(limited.slots))

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout.D().String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.D())
	defer cancel()
	errShutdown := hs.Shutdown(sctx)
	if errors.Is(errShutdown, context.DeadlineExceeded) {
		log.Warn("in-flight requests did not finish in time; closing them")
		hs.Close()
	}
	log.Info("stopped")
	return ignoreDeadline(errShutdown)
}

// newHTTPServer serves h with cfg's connection timeouts.
//
// ReadTimeout bounds reading a whole request, headers and body, from its
// first byte; it never cuts a response: writes have no deadline, and once
// a handler has read the body to its end net/http clears the read deadline
// for its background read (which cancels the request's context when the
// client goes away). So streams and slow upstreams run as long as they
// need, while a body that trickles in is cut at the timeout. A
// connection's first request must arrive within ReadHeaderTimeout of the
// connection; a keep-alive connection's next within IdleTimeout.
func newHTTPServer(cfg config.Config, h http.Handler, limited *connLimiter, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout.D(),
		ReadTimeout:       cfg.ReadTimeout.D(),
		IdleTimeout:       cfg.IdleTimeout.D(),
		ConnState:         limited.connState,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

func ignoreDeadline(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// RotateMasterKey re-encrypts every secret under a new master key (from
// SWITCHBOARD_NEW_MASTER_KEY, else generated). With a key file the new key
// replaces it; with SWITCHBOARD_MASTER_KEY the new key is printed for the
// operator to set. Every server must be stopped: bbolt's file lock or
// PostgreSQL's serving lock (store.Postgres.Exclusive) ensures it.
//
// With a key file, the new key is first written to master.key.next (which
// OpenVault also accepts), then every secret is re-encrypted in one
// transaction, then master.key.next replaces master.key: a crash at any
// point leaves keys that open every secret. A master.key.next left by an
// interrupted rotation is completed before the new rotation starts.
func RotateMasterKey(ctx context.Context, cfg config.Config, newKeyB64 string, log *slog.Logger, out io.Writer) error {
	st, err := OpenStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	// bbolt's file lock keeps replicas out; PostgreSQL's serving lock
	// does the same: a replica still running would go on sealing secrets
	// under the old key.
	if pg, ok := st.(*store.Postgres); ok {
		release, err := pg.Exclusive(ctx)
		if err != nil {
			return fmt.Errorf("rotate the master key: %w", err)
		}
		defer release()
	}
	newKey := vault.NewKey()
	if newKeyB64 != "" {
		if newKey, err = vault.ParseKey(newKeyB64); err != nil {
			return fmt.Errorf("SWITCHBOARD_NEW_MASTER_KEY: %w", err)
		}
	}
	if cfg.MasterKey != "" {
		oldKey, err := parseMasterKey(cfg)
		if err != nil {
			return err
		}
		n, err := reseal(ctx, st, newKey, oldKey)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "re-encrypted %d secrets under key %s. Set SWITCHBOARD_MASTER_KEY to:\n%s\n", n, vault.KeyID(newKey), vault.EncodeKey(newKey))
		return nil
	}

	keyPath := filepath.Join(cfg.DataDir, vault.KeyFile)
	nextPath := keyPath + ".next"
	oldKey, err := readKeyFile(keyPath)
	if err != nil {
		return fmt.Errorf("read current master key: %w", err)
	}
	if _, err := os.Stat(nextPath); err == nil {
		pending, err := readKeyFile(nextPath)
		if err != nil {
			return fmt.Errorf("a previous rotation left %s: %w", nextPath, err)
		}
		if _, err := reseal(ctx, st, pending, oldKey); err != nil {
			return fmt.Errorf("complete the interrupted rotation: %w", err)
		}
		if err := os.Rename(nextPath, keyPath); err != nil {
			return err
		}
		log.Warn("completed an interrupted master key rotation", "keyId", vault.KeyID(pending))
		oldKey = pending
	}
	if err := vault.WriteKeyFile(nextPath, newKey); err != nil {
		return err
	}
	n, err := reseal(ctx, st, newKey, oldKey)
	if err != nil {
		_ = os.Remove(nextPath) // nothing was sealed under it
		return err
	}
	if err := os.Rename(nextPath, keyPath); err != nil {
		return err
	}
	fmt.Fprintf(out, "re-encrypted %d secrets; new master key %s written to %s\n", n, vault.KeyID(newKey), keyPath)
	return nil
}

// reseal re-encrypts every secret under newKey, opening with newKey or oldKey.
func reseal(ctx context.Context, st store.Store, newKey, oldKey []byte) (int, error) {
	v, err := vault.New(newKey, oldKey)
	if err != nil {
		return 0, err
	}
	n, err := v.Reseal(ctx, st)
	if err != nil {
		return 0, errs.Wrap(errs.Internal, err, "re-encrypt secrets (nothing was changed)")
	}
	return n, nil
}

func readKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := vault.ParseKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
