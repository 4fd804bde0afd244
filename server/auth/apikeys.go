package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// KeyPrefix starts every API key.
const KeyPrefix = "sb_"

const (
	bucketKeys   = "apikeys"
	bucketByHash = "apikeys_by_hash"
)

// APIKey is a stored API key; the key itself is never stored, only its hash.
type APIKey struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	Hint      string     `json:"hint"` // the first characters, to recognise a key
	Hash      string     `json:"hash"` // hex SHA-256 of the key; never sent
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	Version   int64      `json:"version"`
}

// Public is the key as the API and events show it.
func (k APIKey) Public() APIKey {
	k.Hash = ""
	return k
}

// Keys manages API keys.
type Keys struct {
	Store  store.Store
	Events events.Recorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

var _ Authenticator = (*Keys)(nil)

func (k *Keys) now() time.Time {
	if k.Now != nil {
		return k.Now().UTC()
	}
	return time.Now().UTC()
}

// NewAPIKeyInput is what a caller supplies to create a key.
type NewAPIKeyInput struct {
	Name      string
	Scopes    []string
	ExpiresAt *time.Time
	// Secret, when set, is used as the key instead of a random one (the
	// bootstrap admin key from SWITCHBOARD_ADMIN_KEY).
	Secret string
}

// Create stores a new key and returns it with its secret, shown only now.
func (k *Keys) Create(ctx context.Context, in NewAPIKeyInput) (APIKey, string, error) {
	var ps []errs.Problem
	if strings.TrimSpace(in.Name) == "" || len(in.Name) > 128 {
		ps = append(ps, errs.Problem{Field: "name", Problem: "must be 1-128 characters"})
	}
	if len(in.Scopes) == 0 {
		ps = append(ps, errs.Problem{Field: "scopes", Problem: "must list at least one scope"})
	}
	for i, s := range in.Scopes {
		if !ValidScope(s) {
			ps = append(ps, errs.Problem{Field: "scopes[" + strconv.Itoa(i) + "]", Problem: "unknown scope " + strconv.Quote(s) + "; known: " + strings.Join(Scopes, ", ")})
		}
	}
	now := k.now()
	if in.ExpiresAt != nil && !in.ExpiresAt.After(now) {
		ps = append(ps, errs.Problem{Field: "expiresAt", Problem: "must be in the future"})
	}
	if err := errs.Problems("invalid API key", ps); err != nil {
		return APIKey{}, "", err
	}
	secret := in.Secret
	if secret == "" {
		secret = NewKeySecret()
	} else if !strings.HasPrefix(secret, KeyPrefix) || len(secret) < len(KeyPrefix)+32 {
		return APIKey{}, "", errs.E(errs.Validation, "an API key must start with %q and carry at least 32 characters after it", KeyPrefix)
	}
	key := APIKey{
		ID:        "key_" + randomID(),
		Name:      in.Name,
		Scopes:    in.Scopes,
		Hint:      secret[:len(KeyPrefix)+4],
		Hash:      hashKey(secret),
		CreatedAt: now,
		Version:   1,
	}
	if in.ExpiresAt != nil {
		t := in.ExpiresAt.UTC()
		key.ExpiresAt = &t
	}
	err := k.Store.Update(ctx, func(tx store.Tx) error {
		if tx.Get(bucketByHash, key.Hash) != nil {
			return errs.E(errs.Conflict, "this API key already exists")
		}
		if err := store.PutJSON(tx, bucketKeys, key.ID, key); err != nil {
			return err
		}
		if err := tx.Put(bucketByHash, key.Hash, []byte(key.ID)); err != nil {
			return err
		}
		return k.events().Record(tx, events.APIKeyCreated, key.Public())
	})
	if err != nil {
		return APIKey{}, "", err
	}
	return key.Public(), secret, nil
}

// Get returns one key without its hash.
func (k *Keys) Get(ctx context.Context, id string) (APIKey, error) {
	var key APIKey
	err := k.Store.View(ctx, func(tx store.Tx) error {
		if err := store.GetJSON(tx, bucketKeys, id, &key); err != nil {
			return notFound(err, id)
		}
		return nil
	})
	return key.Public(), err
}

// List returns a page of keys in id order.
func (k *Keys) List(ctx context.Context, cursor string, limit int) ([]APIKey, string, error) {
	var (
		keys []APIKey
		next string
	)
	err := k.Store.View(ctx, func(tx store.Tx) error {
		var err error
		keys, next, err = store.Page[APIKey](tx, bucketKeys, "", cursor, limit)
		return err
	})
	for i := range keys {
		keys[i] = keys[i].Public()
	}
	return keys, next, err
}

// Count returns how many keys exist.
func (k *Keys) Count(ctx context.Context) (int, error) {
	n := 0
	err := k.Store.View(ctx, func(tx store.Tx) error {
		return tx.Scan(bucketKeys, "", "", func(string, []byte) (bool, error) { n++; return true, nil })
	})
	return n, err
}

// Revoke deletes a key; it stops authenticating at once.
func (k *Keys) Revoke(ctx context.Context, id string) error {
	return k.Store.Update(ctx, func(tx store.Tx) error {
		var key APIKey
		if err := store.GetJSON(tx, bucketKeys, id, &key); err != nil {
			return notFound(err, id)
		}
		if err := tx.Delete(bucketByHash, key.Hash); err != nil {
			return err
		}
		if err := tx.Delete(bucketKeys, id); err != nil {
			return err
		}
		return k.events().Record(tx, events.APIKeyRevoked, key.Public())
	})
}

// Authenticate implements Authenticator for credentials starting with sb_.
func (k *Keys) Authenticate(ctx context.Context, credential string) (*Principal, error) {
	if !strings.HasPrefix(credential, KeyPrefix) {
		return nil, ErrNotMine
	}
	h := hashKey(credential)
	var key APIKey
	err := k.Store.View(ctx, func(tx store.Tx) error {
		id := tx.Get(bucketByHash, h)
		if id == nil {
			return errs.E(errs.Unauthenticated, "unknown or revoked API key")
		}
		return store.GetJSON(tx, bucketKeys, string(id), &key)
	})
	if err != nil {
		if errs.KindOf(err) == errs.Unauthenticated {
			return nil, err
		}
		return nil, errs.Wrap(errs.Unauthenticated, err, "unknown or revoked API key")
	}
	if subtle.ConstantTimeCompare([]byte(key.Hash), []byte(h)) != 1 {
		return nil, errs.E(errs.Unauthenticated, "unknown or revoked API key")
	}
	if key.ExpiresAt != nil && !k.now().Before(*key.ExpiresAt) {
		return nil, errs.E(errs.Unauthenticated, "API key %s expired at %s", key.ID, key.ExpiresAt.Format(time.RFC3339))
	}
	return &Principal{ID: key.ID, Kind: "api_key", Name: key.Name, Scopes: key.Scopes}, nil
}

func (k *Keys) events() events.Recorder {
	if k.Events == nil {
		return events.Nop{}
	}
	return k.Events
}

// NewKeySecret returns a fresh API key: sb_ and 256 random bits.
func NewKeySecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func hashKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func randomID() string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func notFound(err error, id string) error {
	if errs.KindOf(err) == errs.NotFound {
		return errs.E(errs.NotFound, "API key %q not found", id)
	}
	return err
}
