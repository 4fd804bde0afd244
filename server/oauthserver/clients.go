package oauthserver

import (
	"context"
	"crypto/subtle"
	"slices"
	"strings"

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

// Client is a registered OAuth client. The secret is never stored, only its
// SHA-256 (it carries 256 random bits, so a slow hash would add nothing).
type Client struct {
	// ID is the client_id ("oc_" + 32 hex digits, sorting by creation time).
	ID string `json:"id"`
	// Name is the client's human name.
	Name string `json:"name"`
	// Scopes are the most a token of this client may carry.
	Scopes []string `json:"scopes"`
	// Policy limits the models, connectors, rate and spend of its tokens.
	auth.Policy
	// SecretHash is the hex SHA-256 of the secret; empty in Public.
	SecretHash string `json:"secretHash,omitempty"`
	// CreatedAt is when the client was registered (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// Version starts at 1 and grows with each UpdateClient.
	Version int64 `json:"version"`
}

// Public is the client as the API shows it.
func (c Client) Public() Client {
	c.SecretHash = ""
	return c
}

// NewClientInput is what an admin supplies to register a client.
type NewClientInput struct {
	Name   string
	Scopes []string
	Policy auth.Policy
}

// CreateClient registers a client and returns it with its secret, shown
// only now. Invalid input is an errs.Validation error listing every problem.
func (s *Service) CreateClient(ctx context.Context, in NewClientInput) (Client, string, error) {
	ps := append(auth.NameProblems(in.Name), auth.ScopeProblems(in.Scopes)...)
	ps = append(ps, in.Policy.Problems()...)
	if err := errs.Problems("invalid OAuth client", ps); err != nil {
		return Client{}, "", err
	}
	now := s.now().UTC()
	secret := newSecret()
	c := Client{
		ID:         ids.New(ClientIDPrefix, now),
		Name:       in.Name,
		Scopes:     slices.Clone(in.Scopes),
		Policy:     in.Policy.Normalized(),
		SecretHash: hashSecret(secret),
		CreatedAt:  now,
		Version:    1,
	}
	err := s.store.Update(ctx, func(tx store.Tx) error {
		if err := store.PutJSON(tx, ClientsBucket, c.ID, c); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return Client{}, "", err
	}
	return c.Public(), secret, nil
}

// UpdateClientInput is what changes in place on a client: its name and policy.
type UpdateClientInput struct {
	Name   string
	Policy auth.Policy
}

// UpdateClient replaces a client's name and policy, keeping its secret and
// its tokens, and increments its version. version, when not 0, must be
// the current one (errs.PreconditionFailed otherwise). Its tokens follow
// the new policy from their next request.
func (s *Service) UpdateClient(ctx context.Context, id string, version int64, in UpdateClientInput) (Client, error) {
	ps := append(auth.NameProblems(in.Name), in.Policy.Problems()...)
	if err := errs.Problems("invalid OAuth client", ps); err != nil {
		return Client{}, err
	}
	var c Client
	err := s.store.Update(ctx, func(tx store.Tx) error {
		c = Client{} // not what a failed run left
		if err := clientNotFound(store.GetJSON(tx, ClientsBucket, id, &c), id); err != nil {
			return err
		}
		if version != 0 && version != c.Version {
			return errs.E(errs.PreconditionFailed, "OAuth client %s is at version %d, not %d; read it again and retry", id, c.Version, version)
		}
		c.Name = in.Name
		c.Policy = in.Policy.Normalized()
		c.Version++
		if err := store.PutJSON(tx, ClientsBucket, id, c); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return Client{}, err
	}
	return c.Public(), nil
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

// DeleteClient removes a client; its tokens stop authenticating at once on
// this replica, and on the others as soon as they see the commit (within
// a second: store.Changes).
func (s *Service) DeleteClient(ctx context.Context, id string) error {
	return s.store.Update(ctx, func(tx store.Tx) error {
		if tx.Get(ClientsBucket, id) == nil {
			return clientNotFound(errs.NotFound, id)
		}
		if err := tx.Delete(ClientsBucket, id); err != nil {
			return err
		}
		tx.OnCommit(func() { s.cache.dropClient(id) })
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

// clientIndex caches the clients read from the store, so that token
// issuance and verification need no store read. Entries are valid while
// the store reports no write to the clients bucket by any replica
// (store.Changes), so a client changed or deleted through another replica
// is read again.
type clientIndex struct {
	cache store.Cache[string, cachedClient]
}

// cachedClient is a client, or the fact that there is none with that id.
type cachedClient struct {
	c     Client
	found bool
}

func (x *clientIndex) lookup(ctx context.Context, st store.Store, id string) (Client, bool, error) {
	if !strings.HasPrefix(id, ClientIDPrefix) || len(id) > 64 {
		return Client{}, false, nil
	}
	changes := st.Changes(ClientsBucket)
	if e, ok := x.cache.Get(id, changes); ok {
		return e.c, e.found, nil
	}
	var c Client
	err := st.View(ctx, func(tx store.Tx) error { return store.GetJSON(tx, ClientsBucket, id, &c) })
	switch {
	case errs.KindOf(err) == errs.NotFound:
		x.cache.Put(id, cachedClient{}, changes)
		return Client{}, false, nil
	case err != nil:
		return Client{}, false, err
	}
	x.cache.Put(id, cachedClient{c: c, found: true}, changes)
	return c, true, nil
}

func newSecret() string { return ids.Secret(SecretPrefix) }

func hashSecret(secret string) string { return ids.Digest(secret) }

func clientNotFound(err error, id string) error {
	if errs.KindOf(err) == errs.NotFound {
		return errs.E(errs.NotFound, "OAuth client %q not found", id)
	}
	return err
}
