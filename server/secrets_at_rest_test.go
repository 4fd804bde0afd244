package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestDatabaseFileHoldsNoPlaintextSecret(t *testing.T) {
	env := servertest.New(t)
	const (
		visible = "visible-name-marker-5b2e"  // not a secret: must be in the file
		marker  = "vault-secret-marker-9f41a" // sealed: must not
	)
	created := createKey(t, env.Client(t), visible, []client.Scope{client.ScopeLLM}, nil)
	if err := env.Store.Update(bg, func(tx store.Tx) error {
		return env.Vault.Put(tx, "connector/acme/clientSecret", []byte(marker))
	}); err != nil {
		t.Fatal(err)
	}
	_ = env.Store.View(bg, func(tx store.Tx) error {
		if got, err := env.Vault.Get(tx, "connector/acme/clientSecret"); err != nil || string(got) != marker {
			t.Fatalf("vault round trip = %q, %v", got, err)
		}
		return nil
	})
	raw := env.StoredBytes(t)
	sum := sha256.Sum256([]byte(created.Key))
	// Positive controls: the test reads what the server stored, and would see plaintext.
	for _, want := range []string{visible, hex.EncodeToString(sum[:]), "connector/acme/clientSecret"} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Fatalf("the stored data lacks %q: the test is not reading what the server wrote", want)
		}
	}
	for name, secret := range map[string]string{
		"vault secret":     marker,
		"new API key":      created.Key,
		"API key body":     strings.TrimPrefix(created.Key, "sb_"),
		"admin API key":    env.AdminKey,
		"vault secret b64": "dmF1bHQtc2VjcmV0LW1hcmtlci05ZjQxYQ", // base64 of the marker
	} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the database holds the %s in plaintext", name)
		}
	}
}

// seedSecrets stores secrets in a data dir whose vault comes from cfg.
func seedSecrets(t *testing.T, cfg config.Config, secrets map[string]string) {
	t.Helper()
	st, err := server.OpenStore(bg, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := server.OpenVault(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(bg, func(tx store.Tx) error {
		for ref, s := range secrets {
			if err := v.Put(tx, ref, []byte(s)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// openSecrets reads every secret back with the given vault.
func openSecrets(t *testing.T, cfg config.Config, v *vault.Vault, refs map[string]string) error {
	t.Helper()
	st, err := server.OpenStore(bg, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return st.View(bg, func(tx store.Tx) error {
		for ref, want := range refs {
			got, err := v.Get(tx, ref)
			if err != nil {
				return err
			}
			if string(got) != want {
				t.Errorf("%s = %q, want %q", ref, got, want)
			}
		}
		return nil
	})
}

func mustVault(t *testing.T, keys ...[]byte) *vault.Vault {
	t.Helper()
	v, err := vault.New(keys[0], keys[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func readKey(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := vault.ParseKey(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var rotationSecrets = map[string]string{
	"connector/a/clientSecret": "alpha-secret",
	"connection/a/c1/token":    "beta-secret",
	"webhook/w1/secret":        "gamma-secret",
}

func TestRotateMasterKeyFile(t *testing.T) {
	cfg := runConfig(t, t.TempDir())
	seedSecrets(t, cfg, rotationSecrets) // generates master.key
	keyPath := filepath.Join(cfg.DataDir, vault.KeyFile)
	oldKey := readKey(t, keyPath)

	var out bytes.Buffer
	if err := server.RotateMasterKey(bg, cfg, "", quiet, &out); err != nil {
		t.Fatal(err)
	}
	newKey := readKey(t, keyPath)
	if bytes.Equal(oldKey, newKey) {
		t.Fatal("master.key was not replaced")
	}
	if fi, _ := os.Stat(keyPath); fi.Mode().Perm() != 0o600 {
		t.Errorf("new master.key mode = %v, want 0600", fi.Mode().Perm())
	}
	for _, leftover := range []string{keyPath + ".next", keyPath + ".tmp", keyPath + ".next.tmp"} {
		if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind", leftover)
		}
	}
	if !strings.Contains(out.String(), "re-encrypted 3 secrets") || !strings.Contains(out.String(), vault.KeyID(newKey)) || strings.Contains(out.String(), vault.EncodeKey(newKey)) {
		t.Errorf("output %q: want the count and key id, never the key", out.String())
	}
	// The data opens with the new key alone, no longer with the old one.
	if err := openSecrets(t, cfg, mustVault(t, newKey), rotationSecrets); err != nil {
		t.Fatalf("after rotation, the new key: %v", err)
	}
	if err := openSecrets(t, cfg, mustVault(t, oldKey), rotationSecrets); !errors.Is(err, vault.ErrUnknownKey) {
		t.Errorf("after rotation, the old key: %v, want ErrUnknownKey", err)
	}
	// And the server's own way of loading keys finds it.
	v, err := server.OpenVault(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := openSecrets(t, cfg, v, rotationSecrets); err != nil {
		t.Fatal(err)
	}
}

func TestRotateMasterKeyFromEnvironment(t *testing.T) {
	cfg := runConfig(t, t.TempDir())
	oldKey := vault.NewKey()
	cfg.MasterKey = vault.EncodeKey(oldKey)
	seedSecrets(t, cfg, rotationSecrets)
	newKey := vault.NewKey()

	var out bytes.Buffer
	if err := server.RotateMasterKey(bg, cfg, vault.EncodeKey(newKey), quiet, &out); err != nil {
		t.Fatal(err)
	}
	// The operator must set the new key: it is printed, nothing is written.
	if !strings.Contains(out.String(), vault.EncodeKey(newKey)) || !strings.Contains(out.String(), "SWITCHBOARD_MASTER_KEY") {
		t.Errorf("output %q does not tell the new key to set", out.String())
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, vault.KeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Error("a key file was written in environment mode")
	}
	if err := openSecrets(t, cfg, mustVault(t, newKey), rotationSecrets); err != nil {
		t.Fatal(err)
	}

	// A wrong current key changes nothing.
	wrong := cfg
	wrong.MasterKey = vault.EncodeKey(vault.NewKey())
	if err := server.RotateMasterKey(bg, wrong, "", quiet, io.Discard); err == nil || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("rotation with a wrong key = %v", err)
	}
	if err := openSecrets(t, cfg, mustVault(t, newKey), rotationSecrets); err != nil {
		t.Fatalf("a failed rotation damaged the data: %v", err)
	}
	// A malformed key is refused without echoing it.
	bad := cfg
	bad.MasterKey = "not-a-key"
	if err := server.RotateMasterKey(bg, bad, "", quiet, io.Discard); err == nil || strings.Contains(err.Error(), "not-a-key") {
		t.Errorf("rotation with a malformed key = %v", err)
	}
}

func TestRotateMasterKeyCompletesAnInterruptedRotation(t *testing.T) {
	for _, crashed := range []string{"before re-encrypting", "after re-encrypting"} {
		t.Run(crashed, func(t *testing.T) {
			cfg := runConfig(t, t.TempDir())
			seedSecrets(t, cfg, rotationSecrets)
			keyPath := filepath.Join(cfg.DataDir, vault.KeyFile)
			oldKey := readKey(t, keyPath)
			midKey := vault.NewKey()
			// The interrupted rotation wrote master.key.next ...
			if err := vault.WriteKeyFile(keyPath+".next", midKey); err != nil {
				t.Fatal(err)
			}
			if crashed == "after re-encrypting" {
				// ... and re-encrypted everything, but did not rename.
				st, err := server.OpenStore(bg, cfg, quiet)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := mustVault(t, midKey, oldKey).Reseal(bg, st); err != nil {
					t.Fatal(err)
				}
				st.Close()
			}
			// The server still opens everything meanwhile.
			v, err := server.OpenVault(cfg, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if err := openSecrets(t, cfg, v, rotationSecrets); err != nil {
				t.Fatalf("server vault during an interrupted rotation: %v", err)
			}

			if err := server.RotateMasterKey(bg, cfg, "", quiet, io.Discard); err != nil {
				t.Fatal(err)
			}
			final := readKey(t, keyPath)
			if bytes.Equal(final, oldKey) || bytes.Equal(final, midKey) {
				t.Fatal("master.key not rotated")
			}
			if _, err := os.Stat(keyPath + ".next"); !errors.Is(err, os.ErrNotExist) {
				t.Error("master.key.next left behind")
			}
			if err := openSecrets(t, cfg, mustVault(t, final), rotationSecrets); err != nil {
				t.Fatalf("after completing the interrupted rotation: %v", err)
			}
		})
	}
}
