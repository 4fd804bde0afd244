package auth

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ids"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// KeyPrefix starts every API key.
const KeyPrefix = "sb_"

// KindAPIKey is the Principal.Kind of API key callers.
const KindAPIKey = "api_key"

const (
	bucketKeys   = "apikeys"
	bucketByHash = "apikeys_by_hash"
)

// APIKey is a stored API key; the key itself is never stored, only its hash.
type APIKey struct {
	// ID identifies the key ("key_" + 32 hex digits, sorting by creation time).
	ID string `json:"id"`
	// Name is the key's human name.
	Name string `json:"name"`
	// Scopes the key grants.
	Scopes []string `json:"scopes"`
	// Prefix is the first characters of the secret, to recognise a key.
	Prefix string `json:"prefix"`
	// Hash is the hex SHA-256 of the secret; never sent (empty in Public).
	Hash string `json:"hash,omitempty"`
	// CreatedAt is when the key was created (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt is when the key stops working; nil for never.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Policy limits the models, connectors, rate and spend of the key.
	Policy
	// Connection, when set, is the only connection the key's tool calls
	// use (one end user's account); empty lets the caller choose.
	Connection string `json:"connection,omitempty"`
	// Version starts at 1 and grows with each Update.
	Version int64 `json:"version"`
}

// Expired reports whether the key has expired at now.
func (k APIKey) Expired(now time.Time) bool {
	return k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)
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

	// cache holds the keys that authenticated, by hash, so that a request
	// does not read the store; a write to the key buckets (a revocation)
	// empties it when it commits.
	cache store.Cache[string, *APIKey]
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
	// Policy optionally limits what the key may use and spend.
	Policy Policy
	// Connection optionally binds the key to one connection (see
	// APIKey.Connection); it must match ConnectionNamePattern.
	Connection string
	// Secret, when set, is used as the key instead of a random one (the
	// bootstrap admin key from SWITCHBOARD_ADMIN_KEY).
	Secret string
}

// MaxNameLength bounds a credential's name (API key, OAuth client), in characters.
const MaxNameLength = 128

// CheckSecret refuses a caller-chosen API key secret of the wrong form
// (SWITCHBOARD_ADMIN_KEY) with a Validation error that does not echo it.
func CheckSecret(secret string) error {
	if !strings.HasPrefix(secret, KeyPrefix) || len(secret) < len(KeyPrefix)+32 || len(secret) > 512 ||
		strings.ContainsFunc(secret, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return errs.E(errs.Validation, "an API key must start with %q followed by 32 to 500 printable ASCII characters without spaces", KeyPrefix)
	}
	return nil
}

// Create stores a new key and returns it with its secret, shown only now.
// Invalid input is an errs.Validation error listing every problem.
func (k *Keys) Create(ctx context.Context, in NewAPIKeyInput) (APIKey, string, error) {
	var ps []errs.Problem
	ps = append(ps, NameProblems(in.Name)...)
	ps = append(ps, ScopeProblems(in.Scopes)...)
	now := k.now()
	if in.ExpiresAt != nil && !in.ExpiresAt.After(now) {
		ps = append(ps, errs.Problem{Field: "expiresAt", Problem: "must be in the future (now is " + now.Format(time.RFC3339) + ")"})
	}
	ps = append(ps, in.Policy.Problems()...)
	ps = append(ps, ConnectionProblems(in.Connection)...)
	if err := errs.Problems("invalid API key", ps); err != nil {
		return APIKey{}, "", err
	}
	secret := in.Secret
	if secret == "" {
		secret = NewKeySecret()
	} else if err := CheckSecret(secret); err != nil {
		return APIKey{}, "", err
	}
	key := APIKey{
		ID:         ids.New("key_", now),
		Name:       in.Name,
		Scopes:     slices.Clone(in.Scopes),
		Prefix:     secret[:len(KeyPrefix)+4],
		Hash:       hashKey(secret),
		CreatedAt:  now,
		Policy:     in.Policy.Normalized(),
		Connection: in.Connection,
		Version:    1,
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

// NameProblems checks a credential's human name (API key or OAuth client).
func NameProblems(name string) []errs.Problem {
	switch n := utf8.RuneCountInString(name); {
	case strings.TrimSpace(name) == "":
		return []errs.Problem{{Field: "name", Problem: "must not be empty"}}
	case n > MaxNameLength:
		return []errs.Problem{{Field: "name", Problem: fmt.Sprintf("must be at most %d characters, got %d", MaxNameLength, n)}}
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return []errs.Problem{{Field: "name", Problem: "must not contain control characters"}}
	}
	return nil
}

// ScopeProblems checks a credential's scope list: at least one, each known,
// none twice.
func ScopeProblems(scopes []string) []errs.Problem {
	var ps []errs.Problem
	if len(scopes) == 0 {
		ps = append(ps, errs.Problem{Field: "scopes", Problem: "must list at least one scope; known: " + strings.Join(Scopes, ", ")})
	}
	seen := map[string]bool{}
	for i, s := range scopes {
		switch {
		case !ValidScope(s):
			ps = append(ps, errs.Problem{Field: "scopes[" + strconv.Itoa(i) + "]", Problem: "unknown scope " + strconv.Quote(s) + "; known: " + strings.Join(Scopes, ", ")})
		case seen[s]:
			ps = append(ps, errs.Problem{Field: "scopes[" + strconv.Itoa(i) + "]", Problem: "duplicate scope " + strconv.Quote(s)})
		}
		seen[s] = true
	}
	return ps
}

// UpdateAPIKeyInput is what changes in place on a key: its name, policy
// and bound connection ("" unbinds it).
type UpdateAPIKeyInput struct {
	Name       string
	Policy     Policy
	Connection string
}

// ConnectionNamePattern is the syntax of connection names (one end user's
// account on a connector; server/connectors uses this one): a key's bound
// connection is one.
const ConnectionNamePattern = `^[a-z0-9][a-z0-9_-]{0,63}$`

var connectionNameRE = regexp.MustCompile(ConnectionNamePattern)

// ValidConnectionName reports whether s is a connection name.
func ValidConnectionName(s string) bool { return connectionNameRE.MatchString(s) }

// ConnectionNameProblem says what is wrong with the connection name s, ""
// when nothing.
func ConnectionNameProblem(s string) string {
	if ValidConnectionName(s) {
		return ""
	}
	return fmt.Sprintf("connection name %q must match %s: a lower-case letter or digit, then up to 63 lower-case letters, digits, underscores or dashes", s, ConnectionNamePattern)
}

// ConnectionProblems checks a key's bound connection: empty (unbound) or
// a connection name. The connection need not exist yet: a key may be made
// before its end user connects an account.
func ConnectionProblems(connection string) []errs.Problem {
	if connection == "" {
		return nil
	}
	if p := ConnectionNameProblem(connection); p != "" {
		return []errs.Problem{{Field: "connection", Problem: p}}
	}
	return nil
}

// Update replaces a key's name, policy and bound connection, keeping its
// secret, and increments its version. version, when not 0, must be the
// key's current version (errs.PreconditionFailed otherwise). The change
// applies from the next request: the authentication cache is emptied when
// it commits.
func (k *Keys) Update(ctx context.Context, id string, version int64, in UpdateAPIKeyInput) (APIKey, error) {
	ps := append(NameProblems(in.Name), in.Policy.Problems()...)
	ps = append(ps, ConnectionProblems(in.Connection)...)
	if err := errs.Problems("invalid API key", ps); err != nil {
		return APIKey{}, err
	}
	var key APIKey
	err := k.Store.Update(ctx, func(tx store.Tx) error {
		key = APIKey{} // not what a failed run left
		if err := store.GetJSON(tx, bucketKeys, id, &key); err != nil {
			return notFound(err, id)
		}
		if version != 0 && version != key.Version {
			return errs.E(errs.PreconditionFailed, "API key %s is at version %d, not %d; read it again and retry", id, key.Version, version)
		}
		key.Name = in.Name
		key.Policy = in.Policy.Normalized()
		key.Connection = in.Connection
		key.Version++
		if err := store.PutJSON(tx, bucketKeys, id, key); err != nil {
			return err
		}
		return k.events().Record(tx, events.APIKeyUpdated, key.Public())
	})
	if err != nil {
		return APIKey{}, err
	}
	return key.Public(), nil
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

// List returns a page of keys in id (creation) order, at most limit long,
// after the key id cursor; next is "" on the last page.
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

// Revoke deletes a key; it stops authenticating at once. The last
// unexpired admin key cannot be revoked (errs.Conflict), so that the server
// never loses its last administrator.
func (k *Keys) Revoke(ctx context.Context, id string) error {
	now := k.now()
	return k.Store.Update(ctx, func(tx store.Tx) error {
		var key APIKey
		if err := store.GetJSON(tx, bucketKeys, id, &key); err != nil {
			return notFound(err, id)
		}
		if slices.Contains(key.Scopes, ScopeAdmin) && !key.Expired(now) {
			others := 0
			if err := tx.Scan(bucketKeys, "", "", func(otherID string, v []byte) (bool, error) {
				var other APIKey
				if err := json.Unmarshal(v, &other); err != nil {
					return false, fmt.Errorf("decode API key %s: %w", otherID, err)
				}
				if otherID != id && slices.Contains(other.Scopes, ScopeAdmin) && !other.Expired(now) {
					others++
					return false, nil
				}
				return true, nil
			}); err != nil {
				return err
			}
			if others == 0 {
				return errs.E(errs.Conflict, "API key %s is the last admin key; create another admin key before revoking it", id)
			}
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
//
// The key is found by the SHA-256 of the credential (a lookup that reveals
// nothing useful through timing, as the attacker controls only the preimage)
// and the stored hash is then compared in constant time.
func (k *Keys) Authenticate(ctx context.Context, credential string) (*Principal, error) {
	if !strings.HasPrefix(credential, KeyPrefix) {
		return nil, ErrNotMine
	}
	h := hashKey(credential)
	key, err := k.lookup(ctx, h)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(key.Hash), []byte(h)) != 1 {
		return nil, errs.E(errs.Unauthenticated, "unknown or revoked API key")
	}
	if key.Expired(k.now()) {
		return nil, errs.E(errs.Unauthenticated, "API key %s expired at %s", key.ID, key.ExpiresAt.Format(time.RFC3339))
	}
	return &Principal{ID: key.ID, Kind: KindAPIKey, Name: key.Name, Scopes: key.Scopes, CreatedAt: key.CreatedAt, Policy: key.Policy, Connection: key.Connection}, nil
}

// lookup finds the key with hash h, in the cache or else in the store
// (and then caches it). The returned key is shared: read it, never change it.
func (k *Keys) lookup(ctx context.Context, h string) (*APIKey, error) {
	changes := k.Store.Changes(bucketKeys, bucketByHash)
	if key, ok := k.cache.Get(h, changes); ok {
		return key, nil
	}
	key := new(APIKey)
	err := k.Store.View(ctx, func(tx store.Tx) error {
		id := tx.Get(bucketByHash, h)
		if id == nil {
			return errs.E(errs.Unauthenticated, "unknown or revoked API key")
		}
		return store.GetJSON(tx, bucketKeys, string(id), key)
	})
	if err != nil {
		switch errs.KindOf(err) {
		case errs.Unauthenticated, errs.Unavailable:
			// A database that does not answer is not a wrong key (503).
			return nil, err
		}
		return nil, errs.Wrap(errs.Unauthenticated, err, "unknown or revoked API key")
	}
	k.cache.Put(h, key, changes)
	return key, nil
}

func (k *Keys) events() events.Recorder {
	if k.Events == nil {
		return events.Nop{}
	}
	return k.Events
}

// NewKeySecret returns a fresh API key: sb_ and 256 random bits.
func NewKeySecret() string { return ids.Secret(KeyPrefix) }

func hashKey(secret string) string { return ids.Digest(secret) }

func notFound(err error, id string) error {
	if errs.KindOf(err) == errs.NotFound {
		return errs.E(errs.NotFound, "API key %q not found", id)
	}
	return err
}
