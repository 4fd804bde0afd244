package oauthserver

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/ids"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// SigningKeysBucket holds the public part and metadata of the signing keys,
// keyed by key id; the private keys are sealed in the vault under
// SigningKeyRef(kid).
const SigningKeysBucket = "signing_keys"

// Algorithm is the JWS algorithm of issued tokens.
const Algorithm = jose.EdDSA

// SigningKeyRef is the vault reference of a signing key's private part.
func SigningKeyRef(kid string) string { return "signing_keys/" + kid }

// SigningKey is a token signing key as stored and as the API shows it.
type SigningKey struct {
	// KID is the key id, the `kid` of the tokens it signs.
	KID string `json:"kid"`
	// Alg is the JWS algorithm (EdDSA).
	Alg string `json:"alg"`
	// PublicKey is the Ed25519 public key.
	PublicKey []byte `json:"publicKey"`
	// CreatedAt is when the key was generated.
	CreatedAt time.Time `json:"createdAt"`
	// RetiredAt is when a newer key replaced it; nil for the active key.
	RetiredAt *time.Time `json:"retiredAt,omitempty"`
}

// keyring is an immutable snapshot of the keys; swapped atomically.
type keyring struct {
	active    SigningKey
	signer    jose.Signer
	published []SigningKey // active first, then retired, newest first
	public    map[string]SigningKey
	// changes is Store.Changes of the signing keys when they were read:
	// a different count means a replica rotated them since.
	changes uint64
}

// keyState holds the current keyring and throttles reloads caused by
// tokens with unknown key ids.
type keyState struct {
	ring       atomic.Pointer[keyring]
	reloadMu   sync.Mutex
	lastReload time.Time
}

// initKeys loads the keys, creating the first one on a new database (in
// one transaction that finds no key: replicas starting together on a new
// database make one key, not one each).
func (s *Service) initKeys(ctx context.Context) error {
	if _, _, err := s.rotateKey(ctx, true); err != nil {
		return err
	}
	return s.loadKeys(ctx)
}

// ring returns the keyring, first re-read from the store when a replica
// (this one or another) rotated the keys since it was read: every replica
// signs with the active key and publishes the current set.
func (s *Service) ring() *keyring {
	r := s.keys.ring.Load()
	if s.store.Changes(SigningKeysBucket) == r.changes {
		return r
	}
	s.keys.reloadMu.Lock()
	defer s.keys.reloadMu.Unlock()
	if r = s.keys.ring.Load(); s.store.Changes(SigningKeysBucket) == r.changes {
		return r
	}
	if err := s.loadKeys(context.Background()); err != nil {
		s.log.Warn("reloading signing keys failed", "error", err.Error())
	}
	return s.keys.ring.Load()
}

// publishedUntil is when a key retired at t stops being published: every
// token it signed has expired by then.
func (s *Service) publishedUntil(retired time.Time) time.Time {
	return retired.Add(s.ttl + s.leeway)
}

// loadKeys reads the keys and the active private key into a new keyring.
func (s *Service) loadKeys(ctx context.Context) error {
	now := s.now()
	changes := s.store.Changes(SigningKeysBucket)
	var (
		keys []SigningKey
		priv []byte
	)
	err := s.store.View(ctx, func(tx store.Tx) error {
		if err := tx.Scan(SigningKeysBucket, "", "", func(k string, v []byte) (bool, error) {
			var sk SigningKey
			if err := json.Unmarshal(v, &sk); err != nil {
				return false, fmt.Errorf("decode %s/%s: %w", SigningKeysBucket, k, err)
			}
			keys = append(keys, sk)
			return true, nil
		}); err != nil {
			return err
		}
		for _, k := range keys {
			if k.RetiredAt == nil {
				p, err := s.vault.Get(tx, SigningKeyRef(k.KID))
				if err != nil {
					return err
				}
				if len(p) != ed25519.SeedSize {
					return fmt.Errorf("signing key %s: private key missing from the vault", k.KID)
				}
				priv = p
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	r := &keyring{public: map[string]SigningKey{}, changes: changes}
	// Newest first: ids sort by creation time.
	slices.SortFunc(keys, func(a, b SigningKey) int { return strings.Compare(b.KID, a.KID) })
	for _, k := range keys {
		if k.RetiredAt == nil && r.signer == nil {
			signer, err := jose.NewSigner(jose.SigningKey{
				Algorithm: Algorithm,
				Key:       jose.JSONWebKey{Key: ed25519.NewKeyFromSeed(priv), KeyID: k.KID, Algorithm: string(Algorithm)},
			}, (&jose.SignerOptions{}).WithType("at+jwt"))
			if err != nil {
				return err
			}
			r.active, r.signer = k, signer
		}
		if k.RetiredAt == nil || now.Before(s.publishedUntil(*k.RetiredAt)) {
			r.published = append(r.published, k)
			r.public[k.KID] = k
		}
	}
	if r.signer == nil {
		return fmt.Errorf("no active signing key")
	}
	s.keys.ring.Store(r)
	return nil
}

// RotateSigningKey generates a new signing key, makes it the one that signs
// from now on, and retires the previous one: it stays published (and
// accepted) until the tokens it signed have expired, then it is deleted.
func (s *Service) RotateSigningKey(ctx context.Context) (SigningKey, error) {
	nk, _, err := s.rotateKey(ctx, false)
	if err != nil {
		return SigningKey{}, err
	}
	if err := s.loadKeys(ctx); err != nil {
		return SigningKey{}, err
	}
	return nk, nil
}

// rotateKey makes a new active key and retires the current one; when
// first, only if there is no key at all (made reports whether it did).
func (s *Service) rotateKey(ctx context.Context, first bool) (nk SigningKey, made bool, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return SigningKey{}, false, err
	}
	now := s.now().UTC()
	nk = SigningKey{KID: ids.New("sk_", now), Alg: string(Algorithm), PublicKey: pub, CreatedAt: now}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		made = false
		var old []SigningKey
		if err := tx.Scan(SigningKeysBucket, "", "", func(k string, v []byte) (bool, error) {
			var sk SigningKey
			if err := json.Unmarshal(v, &sk); err != nil {
				return false, fmt.Errorf("decode %s/%s: %w", SigningKeysBucket, k, err)
			}
			old = append(old, sk)
			return true, nil
		}); err != nil {
			return err
		}
		if first && len(old) > 0 {
			return nil
		}
		for _, k := range old {
			switch {
			case k.RetiredAt == nil:
				k.RetiredAt = &now
				if err := store.PutJSON(tx, SigningKeysBucket, k.KID, k); err != nil {
					return err
				}
				// Only the active key signs; a retired one only verifies.
				if err := s.vault.Delete(tx, SigningKeyRef(k.KID)); err != nil {
					return err
				}
			case !now.Before(s.publishedUntil(*k.RetiredAt)):
				if err := tx.Delete(SigningKeysBucket, k.KID); err != nil {
					return err
				}
			}
		}
		if err := store.PutJSON(tx, SigningKeysBucket, nk.KID, nk); err != nil {
			return err
		}
		made = true
		return s.vault.Put(tx, SigningKeyRef(nk.KID), priv.Seed())
	})
	return nk, made, err
}

// SigningKeys returns the published keys, the active one first.
func (s *Service) SigningKeys() []SigningKey {
	r := s.ring()
	now := s.now()
	out := make([]SigningKey, 0, len(r.published))
	for _, k := range r.published {
		if k.RetiredAt == nil || now.Before(s.publishedUntil(*k.RetiredAt)) {
			out = append(out, k)
		}
	}
	return out
}

// JWKS returns the JSON Web Key Set of the published keys (RFC 7517).
func (s *Service) JWKS() jose.JSONWebKeySet {
	ks := s.SigningKeys()
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(ks))}
	for _, k := range ks {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: ed25519.PublicKey(k.PublicKey), KeyID: k.KID, Algorithm: k.Alg, Use: "sig"})
	}
	return set
}

// verificationKey returns the public key for kid while it is published.
// An unknown kid makes the service re-read the keys (another replica may
// have rotated), at most once a second.
func (s *Service) verificationKey(ctx context.Context, kid string) (SigningKey, bool) {
	if k, ok := s.ring().public[kid]; ok {
		return k, true
	}
	s.keys.reloadMu.Lock()
	defer s.keys.reloadMu.Unlock()
	if k, ok := s.keys.ring.Load().public[kid]; ok {
		return k, true
	}
	if now := s.now(); now.Sub(s.keys.lastReload) >= time.Second {
		s.keys.lastReload = now
		if err := s.loadKeys(ctx); err != nil {
			s.log.Warn("reloading signing keys failed", "error", err.Error())
		}
	}
	k, ok := s.keys.ring.Load().public[kid]
	return k, ok
}
