// Package vault seals secrets with AES-256-GCM before they reach the store.
//
// A sealed value is "sbv1" | key id (8 bytes) | nonce (12 bytes) | ciphertext,
// authenticated with the identity of the record it belongs to, so a sealed
// value copied to another record does not open. Rotation re-encrypts every
// sealed value under a new master key.
package vault

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// KeySize is the master key length in bytes.
const KeySize = 32

const (
	magic    = "sbv1"
	idLen    = 8
	nonceLen = 12
)

// Bucket is the store bucket sealed values live in.
const Bucket = "secrets"

// ErrUnknownKey means a value was sealed under a key this vault does not hold.
var ErrUnknownKey = errors.New("vault: value sealed with an unknown master key")

// ErrCorrupt means a sealed value failed authentication.
var ErrCorrupt = errors.New("vault: sealed value failed authentication")

// Vault seals and opens secrets with the current master key, and opens
// values sealed with previous keys.
type Vault struct {
	current []byte // key id of the sealing key
	aeads   map[string]cipher.AEAD
}

// New returns a vault sealing with master and opening with master or any of previous.
func New(master []byte, previous ...[]byte) (*Vault, error) {
	v := &Vault{aeads: map[string]cipher.AEAD{}}
	for i, k := range append([][]byte{master}, previous...) {
		if len(k) != KeySize {
			return nil, fmt.Errorf("vault: master key must be %d bytes, got %d", KeySize, len(k))
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		id := keyID(k)
		v.aeads[string(id)] = aead
		if i == 0 {
			v.current = id
		}
	}
	return v, nil
}

func keyID(k []byte) []byte {
	sum := sha256.Sum256(append([]byte("switchboard-key-id:"), k...))
	return sum[:idLen]
}

// KeyID returns the printable id of a master key (safe to log).
func KeyID(k []byte) string { return hex.EncodeToString(keyID(k)) }

// CurrentKeyID returns the printable id of the sealing key.
func (v *Vault) CurrentKeyID() string { return hex.EncodeToString(v.current) }

// Seal encrypts plaintext bound to aad (the owning record's identity).
func (v *Vault) Seal(aad string, plaintext []byte) ([]byte, error) {
	aead := v.aeads[string(v.current)]
	out := make([]byte, 0, len(magic)+idLen+nonceLen+len(plaintext)+aead.Overhead())
	out = append(out, magic...)
	out = append(out, v.current...)
	nonce := make([]byte, nonceLen)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plaintext, []byte(aad)), nil
}

// Open decrypts a value sealed for aad.
func (v *Vault) Open(aad string, sealed []byte) ([]byte, error) {
	if len(sealed) < len(magic)+idLen+nonceLen || !bytes.HasPrefix(sealed, []byte(magic)) {
		return nil, ErrCorrupt
	}
	rest := sealed[len(magic):]
	aead, ok := v.aeads[string(rest[:idLen])]
	if !ok {
		return nil, ErrUnknownKey
	}
	nonce := rest[idLen : idLen+nonceLen]
	pt, err := aead.Open(nil, nonce, rest[idLen+nonceLen:], []byte(aad))
	if err != nil {
		return nil, ErrCorrupt
	}
	return pt, nil
}

// Put seals secret and stores it under ref (the record identity, e.g.
// "connector/github/clientSecret").
func (v *Vault) Put(tx store.Tx, ref string, secret []byte) error {
	sealed, err := v.Seal(ref, secret)
	if err != nil {
		return err
	}
	return tx.Put(Bucket, ref, sealed)
}

// Get opens the secret stored under ref; nil, nil when there is none.
func (v *Vault) Get(tx store.Tx, ref string) ([]byte, error) {
	sealed := tx.Get(Bucket, ref)
	if sealed == nil {
		return nil, nil
	}
	pt, err := v.Open(ref, sealed)
	if err != nil {
		return nil, fmt.Errorf("open secret %s: %w", ref, err)
	}
	return pt, nil
}

// Has reports whether a secret is stored under ref.
func (v *Vault) Has(tx store.Tx, ref string) bool { return tx.Get(Bucket, ref) != nil }

// Delete removes the secret under ref.
func (v *Vault) Delete(tx store.Tx, ref string) error { return tx.Delete(Bucket, ref) }

// DeletePrefix removes every secret whose ref starts with prefix.
func (v *Vault) DeletePrefix(tx store.Tx, prefix string) error {
	var refs []string
	if err := tx.Scan(Bucket, prefix, "", func(k string, _ []byte) (bool, error) {
		refs = append(refs, k)
		return true, nil
	}); err != nil {
		return err
	}
	for _, r := range refs {
		if err := tx.Delete(Bucket, r); err != nil {
			return err
		}
	}
	return nil
}

// Reseal re-encrypts every stored secret under the current key in one
// transaction and returns how many it rewrote.
func (v *Vault) Reseal(ctx context.Context, s store.Store) (int, error) {
	n := 0
	err := s.Update(ctx, func(tx store.Tx) error {
		n = 0 // counted again if the transaction runs again
		type kv struct {
			k string
			v []byte
		}
		var all []kv
		if err := tx.Scan(Bucket, "", "", func(k string, val []byte) (bool, error) {
			all = append(all, kv{k, bytes.Clone(val)})
			return true, nil
		}); err != nil {
			return err
		}
		for _, e := range all {
			pt, err := v.Open(e.k, e.v)
			if err != nil {
				return fmt.Errorf("open secret %s: %w", e.k, err)
			}
			if err := v.Put(tx, e.k, pt); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// ParseKey decodes a base64 (standard or URL, padded or not) 32-byte key.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != KeySize {
				return nil, fmt.Errorf("master key must decode to %d bytes, got %d", KeySize, len(k))
			}
			return k, nil
		}
	}
	return nil, errors.New("master key is not valid base64")
}

// NewKey returns a fresh random master key.
func NewKey() []byte {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		panic(err)
	}
	return k
}

// EncodeKey returns the base64 form of a key, as SWITCHBOARD_MASTER_KEY takes it.
func EncodeKey(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

// KeyFile is the name of the generated master key file in the data dir.
const KeyFile = "master.key"

// LoadOrCreateKeyFile reads <dataDir>/master.key, generating it with mode
// 0600 when absent; created reports whether it was generated.
func LoadOrCreateKeyFile(dataDir string) (key []byte, created bool, err error) {
	path := filepath.Join(dataDir, KeyFile)
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := ParseKey(string(b))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return k, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, false, err
	}
	k := NewKey()
	if err := WriteKeyFile(path, k); err != nil {
		return nil, false, err
	}
	return k, true, nil
}

// WriteKeyFile atomically and durably writes key to path with mode 0600.
func WriteKeyFile(path string, key []byte) error {
	tmp := path + ".tmp"
	// A stale temp file could carry wider permissions; start afresh.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(EncodeKey(key) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
