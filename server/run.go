package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// DBFile is the database file name inside the data dir.
const DBFile = "switchboard.db"

// OpenStore opens the bbolt database of cfg, failing fast when another
// process holds it.
func OpenStore(cfg config.Config) (*store.Bolt, error) {
	st, err := store.OpenBolt(filepath.Join(cfg.DataDir, DBFile))
	if errors.Is(err, store.ErrInUse) {
		return nil, fmt.Errorf("%w (%s): stop the other switchboard using %s first", store.ErrInUse, filepath.Join(cfg.DataDir, DBFile), cfg.DataDir)
	}
	return st, err
}

// OpenVault builds the vault from SWITCHBOARD_MASTER_KEY or the key file in
// the data dir (generated, with a warning, when absent). A key left in
// master.key.next by an interrupted rotation is accepted for opening too.
func OpenVault(cfg config.Config, log *slog.Logger) (*vault.Vault, error) {
	var key []byte
	if cfg.MasterKey != "" {
		k, err := vault.ParseKey(cfg.MasterKey)
		if err != nil {
			return nil, fmt.Errorf("SWITCHBOARD_MASTER_KEY: %w", err)
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

// Bootstrap makes sure an admin credential exists: the SWITCHBOARD_ADMIN_KEY
// one when given, else a generated key printed once to out on first start.
func Bootstrap(ctx context.Context, keys *auth.Keys, adminKey string, out io.Writer) error {
	if adminKey != "" {
		if _, err := keys.Authenticate(ctx, adminKey); err == nil {
			return nil
		}
		_, _, err := keys.Create(ctx, auth.NewAPIKeyInput{Name: "bootstrap-admin", Scopes: []string{auth.ScopeAdmin}, Secret: adminKey})
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
// finishes in-flight requests (bounded by shutdownTimeout) and closes the store.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, out io.Writer) error {
	st, err := OpenStore(cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	v, err := OpenVault(cfg, log)
	if err != nil {
		return err
	}
	srv, err := New(Options{Config: cfg, Store: st, Vault: v, Logger: log})
	if err != nil {
		return err
	}
	if err := Bootstrap(ctx, srv.Keys(), cfg.AdminKey, out); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("switchboard listening", "addr", ln.Addr().String(), "dataDir", cfg.DataDir, "keyId", v.CurrentKeyID())

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
	errClose := srv.Close(sctx)
	log.Info("stopped")
	return errors.Join(ignoreDeadline(errShutdown), errClose)
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
// operator to set. The server must be stopped (the database lock ensures it).
func RotateMasterKey(ctx context.Context, cfg config.Config, newKeyB64 string, log *slog.Logger, out io.Writer) error {
	st, err := OpenStore(cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	var oldKey []byte
	if cfg.MasterKey != "" {
		oldKey, _ = vault.ParseKey(cfg.MasterKey)
	} else {
		b, err := os.ReadFile(filepath.Join(cfg.DataDir, vault.KeyFile))
		if err != nil {
			return fmt.Errorf("read current master key: %w", err)
		}
		if oldKey, err = vault.ParseKey(string(b)); err != nil {
			return err
		}
	}
	newKey := vault.NewKey()
	if newKeyB64 != "" {
		if newKey, err = vault.ParseKey(newKeyB64); err != nil {
			return fmt.Errorf("SWITCHBOARD_NEW_MASTER_KEY: %w", err)
		}
	}
	nextPath := filepath.Join(cfg.DataDir, vault.KeyFile+".next")
	if cfg.MasterKey == "" {
		// Written first, so that a crash after the re-encryption leaves a key
		// that opens the data (OpenVault accepts master.key.next).
		if err := vault.WriteKeyFile(nextPath, newKey); err != nil {
			return err
		}
	}
	v, err := vault.New(newKey, oldKey)
	if err != nil {
		return err
	}
	n, err := v.Reseal(ctx, st)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "re-encrypt secrets (nothing was changed)")
	}
	if cfg.MasterKey == "" {
		if err := os.Rename(nextPath, filepath.Join(cfg.DataDir, vault.KeyFile)); err != nil {
			return err
		}
		fmt.Fprintf(out, "re-encrypted %d secrets; new master key %s written to %s\n", n, vault.KeyID(newKey), filepath.Join(cfg.DataDir, vault.KeyFile))
		return nil
	}
	fmt.Fprintf(out, "re-encrypted %d secrets under key %s. Set SWITCHBOARD_MASTER_KEY to:\n%s\n", n, vault.KeyID(newKey), vault.EncodeKey(newKey))
	return nil
}
