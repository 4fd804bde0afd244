package oauthserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ids"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// ClientsBucket holds the OAuth clients, keyed by id.
const ClientsBucket = "oauth_clients"

// ClientIDPrefix starts every client id; SecretPrefix every client secret.
const (
	ClientIDPrefix = "oc_"
	SecretPrefix   = "sbcs_"
)

// MaxNameLength bounds a client's name, in characters.
const MaxNameLength = 128

// Client is a registered OAuth client. The secret is never stored, only its
// SHA-256 (it carries 256 random bits, so a slow hash would add nothing).
type Client struct {
	// ID is the client_id ("oc_" + 32 hex digits, sorting by creation time).
	ID string `json:"id"`
	// Name is the client's human name.
	Name string `json:"name"`
	// Scopes are the most a token of this client may carry.
	Scopes []string `json:"scopes"`
	// RateLimit overrides the default per-credential limits for its tokens.
	RateLimit *auth.RateLimit `json:"rateLimit,omitempty"`
	// SecretHash is the hex SHA-256 of the secret; empty in Public.
	SecretHash string `json:"secretHash,omitempty"`
	// CreatedAt is when the client was registered (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// Version is always 1: clients are immutable.
	Version int64 `json:"version"`
}

// Public is the client as the API shows it.
func (c Client) Public() Client {
	c.SecretHash = ""
	return c
}

// NewClientInput is what an admin supplies to register a client.
type NewClientInput struct {
	Name      string
	Scopes    []string
	RateLimit *auth.RateLimit
}

// CreateClient registers a client and returns it with its secret, shown
// only now. Invalid input is an errs.Validation error listing every problem.
func (s *Service) CreateClient(ctx context.Context, in NewClientInput) (Client, string, error) {
	var ps []errs.Problem
	switch n := utf8.RuneCountInString(in.Name); {
	case strings.TrimSpace(in.Name) == "":
		ps = append(ps, errs.Problem{Field: "name", Problem: "must not be empty"})
	case n > MaxNameLength:
		ps = append(ps, errs.Problem{Field: "name", Problem: fmt.Sprintf("must be at most %d characters, got %d", MaxNameLength, n)})
	case strings.IndexFunc(in.Name, unicode.IsControl) >= 0:
		ps = append(ps, errs.Problem{Field: "name", Problem: "must not contain control characters"})
	}
	if len(in.Scopes) == 0 {
		ps = append(ps, errs.Problem{Field: "scopes", Problem: "must list at least one scope; known: " + strings.Join(auth.Scopes, ", ")})
	}
	seen := map[string]bool{}
	for i, sc := range in.Scopes {
		switch {
		case !auth.ValidScope(sc):
			ps = append(ps, errs.Problem{Field: "scopes[" + strconv.Itoa(i) + "]", Problem: "unknown scope " + strconv.Quote(sc) + "; known: " + strings.Join(auth.Scopes, ", ")})
		case seen[sc]:
			ps = append(ps, errs.Problem{Field: "scopes[" + strconv.Itoa(i) + "]", Problem: "duplicate scope " + strconv.Quote(sc)})
		}
		seen[sc] = true
	}
	ps = append(ps, in.RateLimit.Problems("rateLimit")...)
	if err := errs.Problems("invalid OAuth client", ps); err != nil {
		return Client{}, "", err
	}
	now := s.now().UTC()
	secret := newSecret()
	c := Client{
		ID:         ids.New(ClientIDPrefix, now),
		Name:       in.Name,
		Scopes:     slices.Clone(in.Scopes),
		RateLimit:  in.RateLimit.Normalize(),
		SecretHash: hashSecret(secret),
		CreatedAt:  now,
		Version:    1,
	}
	err := s.store.Update(ctx, func(tx store.Tx) error {
		if err := store.PutJSON(tx, ClientsBucket, c.ID, c); err != nil {
			return err
		}
		tx.OnCommit(func() { s.clients.set(c.ID, c) })
		return nil
	})
	if err != nil {
		return Client{}, "", err
	}
	return c.Public(), secret, nil
}

// GetClient returns one client without its secret hash.
func (s *Service) GetClient(ctx context.Context, id string) (Client, error) {
	var c Client
	err := s.store.View(ctx, func(tx store.Tx) error {
		return clientNotFound(store.GetJSON(tx, ClientsBucket, id, &c), id)
	})
	return c.Public(), err
}

// ListClients returns a page of clients in id (creation) order, at most
// limit long, after the cursor; next is "" on the last page.
func (s *Service) ListClients(ctx context.Context, cursor string, limit int) ([]Client, string, error) {
	var (
		cs   []Client
		next string
	)
	err := s.store.View(ctx, func(tx store.Tx) error {
		var err error
		cs, next, err = store.Page[Client](tx, ClientsBucket, "", cursor, limit)
		return err
	})
	for i := range cs {
		cs[i] = cs[i].Public()
	}
	return cs, next, err
}

// DeleteClient removes a client; its tokens stop authenticating at once
// (in this process; other replicas notice when their tokens expire).
func (s *Service) DeleteClient(ctx context.Context, id string) error {
	return s.store.Update(ctx, func(tx store.Tx) error {
		if tx.Get(ClientsBucket, id) == nil {
			return clientNotFound(errs.NotFound, id)
		}
		if err := tx.Delete(ClientsBucket, id); err != nil {
			return err
		}
		tx.OnCommit(func() {
			s.clients.del(id)
			s.cache.dropClient(id)
		})
		return nil
	})
}

// authenticateClient checks a client's credentials in constant time.
// Unknown ids and wrong secrets fail alike.
func (s *Service) authenticateClient(ctx context.Context, id, secret string) (Client, error) {
	c, ok, err := s.clients.lookup(ctx, s.store, id)
	if err != nil {
		return Client{}, err
	}
	h := hashSecret(secret)
	if !ok {
		// Compare anyway so that an unknown id costs what a known one does.
		subtle.ConstantTimeCompare([]byte(h), []byte(strings.Repeat("0", len(h))))
		return Client{}, tokenError(InvalidClient, "client authentication failed: unknown client_id or wrong client_secret")
	}
	if subtle.ConstantTimeCompare([]byte(c.SecretHash), []byte(h)) != 1 {
		return Client{}, tokenError(InvalidClient, "client authentication failed: unknown client_id or wrong client_secret")
	}
	return c, nil
}

// clientIndex is the in-memory copy of the clients bucket, so that token
// issuance and verification need no store read. It is filled at start and
// kept current by the commit hooks of this process; an id it lacks (a
// client created by another replica) is read from the store.
type clientIndex struct{ mutexMap[Client] }

func (x *clientIndex) load(ctx context.Context, st store.Store) error {
	return st.View(ctx, func(tx store.Tx) error {
		return tx.Scan(ClientsBucket, "", "", func(k string, v []byte) (bool, error) {
			var c Client
			if err := json.Unmarshal(v, &c); err != nil {
				return false, fmt.Errorf("decode %s/%s: %w", ClientsBucket, k, err)
			}
			x.set(k, c)
			return true, nil
		})
	})
}

func (x *clientIndex) lookup(ctx context.Context, st store.Store, id string) (Client, bool, error) {
	if c, ok := x.get(id); ok {
		return c, true, nil
	}
	if !strings.HasPrefix(id, ClientIDPrefix) || len(id) > 64 {
		return Client{}, false, nil
	}
	var c Client
	err := st.View(ctx, func(tx store.Tx) error { return store.GetJSON(tx, ClientsBucket, id, &c) })
	switch {
	case errs.KindOf(err) == errs.NotFound:
		return Client{}, false, nil
	case err != nil:
		return Client{}, false, err
	}
	x.set(id, c)
	return c, true, nil
}

func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func clientNotFound(err error, id string) error {
	if errs.KindOf(err) == errs.NotFound {
		return errs.E(errs.NotFound, "OAuth client %q not found", id)
	}
	return err
}
