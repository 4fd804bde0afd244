package vault_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

var bg = context.Background()

func newVault(t *testing.T, keys ...[]byte) *vault.Vault {
	t.Helper()
	v, err := vault.New(keys[0], keys[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSealOpen(t *testing.T) {
	k := vault.NewKey()
	v := newVault(t, k)
	secret := []byte("client-secret-value")
	sealed, err := v.Seal("connector/github/clientSecret", secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, secret) {
		t.Fatal("sealed value contains the plaintext")
	}
	if !bytes.HasPrefix(sealed, []byte("sbv1")) || !bytes.Contains(sealed[:12], mustHex(t, v.CurrentKeyID())) {
		t.Errorf("sealed value does not start with the format tag and key id: %x", sealed[:12])
	}
	again, _ := v.Seal("connector/github/clientSecret", secret)
	if bytes.Equal(sealed, again) {
		t.Error("two seals of the same secret are identical (nonce reuse)")
	}
	got, err := v.Open("connector/github/clientSecret", sealed)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	empty, _ := v.Seal("r", nil)
	if got, err := v.Open("r", empty); err != nil || len(got) != 0 {
		t.Errorf("empty secret: %q %v", got, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	k := vault.NewKey()
	v := newVault(t, k)
	sealed, err := v.Seal("connection/a/token", []byte("tok"))
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	other := newVault(t, vault.NewKey())

	cases := []struct {
		name   string
		v      *vault.Vault
		aad    string
		sealed []byte
		want   error
	}{
		{"wrong AAD (value moved to another record)", v, "connection/b/token", sealed, vault.ErrCorrupt},
		{"tampered ciphertext", v, "connection/a/token", tampered, vault.ErrCorrupt},
		{"unknown key id", other, "connection/a/token", sealed, vault.ErrUnknownKey},
		{"truncated", v, "connection/a/token", sealed[:10], vault.ErrCorrupt},
		{"not a sealed value", v, "connection/a/token", []byte("plaintext-not-sealed-at-all-xxxxxxxx"), vault.ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.v.Open(tc.aad, tc.sealed)
			if !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("Open = %q, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestNewRejectsBadKeys(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33} {
		if _, err := vault.New(make([]byte, n)); err == nil {
			t.Errorf("New with a %d-byte key succeeded", n)
		}
	}
	if _, err := vault.New(vault.NewKey(), make([]byte, 5)); err == nil {
		t.Error("New with a bad previous key succeeded")
	}
}

func TestParseKey(t *testing.T) {
	k := vault.NewKey()
	for name, s := range map[string]string{
		"std":          base64.StdEncoding.EncodeToString(k),
		"raw std":      base64.RawStdEncoding.EncodeToString(k),
		"url":          base64.URLEncoding.EncodeToString(k),
		"raw url":      base64.RawURLEncoding.EncodeToString(k),
		"with newline": vault.EncodeKey(k) + "\n",
	} {
		got, err := vault.ParseKey(s)
		if err != nil || !bytes.Equal(got, k) {
			t.Errorf("%s: ParseKey = %x, %v", name, got, err)
		}
	}
	for name, s := range map[string]string{
		"not base64": "not base64!",
		"16 bytes":   base64.StdEncoding.EncodeToString(make([]byte, 16)),
		"empty":      "",
	} {
		if _, err := vault.ParseKey(s); err == nil {
			t.Errorf("%s: ParseKey accepted %q", name, s)
		} else if strings.Contains(err.Error(), s) && s != "" {
			t.Errorf("%s: error echoes the key material: %v", name, err)
		}
	}
}

func TestStoreRoundTripAndRotation(t *testing.T) {
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	oldKey := vault.NewKey()
	v := newVault(t, oldKey)
	refs := map[string]string{
		"connector/gh/clientSecret": "s3cret-1",
		"connection/gh/a/token":     "s3cret-2",
		"connection/gh/b/token":     "s3cret-3",
	}
	if err := st.Update(bg, func(tx store.Tx) error {
		for ref, s := range refs {
			if err := v.Put(tx, ref, []byte(s)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Rotation: a vault sealing with the new key and opening with the old.
	newKey := vault.NewKey()
	rotated := newVault(t, newKey, oldKey)
	n, err := rotated.Reseal(bg, st)
	if err != nil || n != len(refs) {
		t.Fatalf("Reseal = %d, %v", n, err)
	}
	onlyNew := newVault(t, newKey)
	onlyOld := newVault(t, oldKey)
	_ = st.View(bg, func(tx store.Tx) error {
		for ref, s := range refs {
			got, err := onlyNew.Get(tx, ref)
			if err != nil || string(got) != s {
				t.Errorf("after rotation, new key opens %s = %q, %v", ref, got, err)
			}
			if _, err := onlyOld.Get(tx, ref); !errors.Is(err, vault.ErrUnknownKey) {
				t.Errorf("after rotation, the old key still opens %s: %v", ref, err)
			}
		}
		if got, err := onlyNew.Get(tx, "connection/none"); got != nil || err != nil {
			t.Errorf("Get of a missing ref = %q, %v; want nil, nil", got, err)
		}
		return nil
	})

	// Reseal with a vault that cannot open everything changes nothing.
	stranger := newVault(t, vault.NewKey())
	if _, err := stranger.Reseal(bg, st); !errors.Is(err, vault.ErrUnknownKey) {
		t.Fatalf("Reseal without the current key = %v, want ErrUnknownKey", err)
	}
	_ = st.View(bg, func(tx store.Tx) error {
		if got, err := onlyNew.Get(tx, "connector/gh/clientSecret"); err != nil || string(got) != "s3cret-1" {
			t.Errorf("a failed reseal changed data: %q %v", got, err)
		}
		return nil
	})

	// Delete and DeletePrefix.
	if err := st.Update(bg, func(tx store.Tx) error {
		if err := onlyNew.DeletePrefix(tx, "connection/gh/"); err != nil {
			return err
		}
		return onlyNew.Delete(tx, "connector/gh/nothing")
	}); err != nil {
		t.Fatal(err)
	}
	_ = st.View(bg, func(tx store.Tx) error {
		if onlyNew.Has(tx, "connection/gh/a/token") || onlyNew.Has(tx, "connection/gh/b/token") || !onlyNew.Has(tx, "connector/gh/clientSecret") {
			t.Error("DeletePrefix removed the wrong secrets")
		}
		return nil
	})
}

func TestKeyFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	k, created, err := vault.LoadOrCreateKeyFile(dir)
	if err != nil || !created || len(k) != vault.KeySize {
		t.Fatalf("first LoadOrCreateKeyFile = %d bytes, created %v, %v", len(k), created, err)
	}
	fi, err := os.Stat(filepath.Join(dir, vault.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("master.key mode = %v, want 0600", fi.Mode().Perm())
	}
	k2, created, err := vault.LoadOrCreateKeyFile(dir)
	if err != nil || created || !bytes.Equal(k, k2) {
		t.Fatalf("second LoadOrCreateKeyFile: created %v, same %v, %v", created, bytes.Equal(k, k2), err)
	}

	// A stale temp file with wide permissions does not widen the key file.
	path := filepath.Join(dir, "other.key")
	if err := os.WriteFile(path+".tmp", []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := vault.WriteKeyFile(path, k); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode = %v after a stale temp file, want 0600", fi.Mode().Perm())
	}

	if err := os.WriteFile(filepath.Join(dir, vault.KeyFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := vault.LoadOrCreateKeyFile(dir); err == nil || !strings.Contains(err.Error(), vault.KeyFile) {
		t.Errorf("corrupt key file: %v, want an error naming the file", err)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
