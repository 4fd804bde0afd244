// Package oauthconn connects accounts to OAuth 2.0 connectors and keeps
// their tokens fresh, so that callers of an action never see a token.
//
// Two grants are supported:
//
//   - authorization_code: Begin answers the provider's authorization URL
//     with a single-use state (bound to connector and connection, expiring
//     after StateTTL) and a PKCE S256 challenge whose verifier never leaves
//     the server; Complete checks the state, exchanges the code with the
//     verifier and seals the tokens in the vault.
//   - client_credentials: Token fetches a token on first use.
//
// Token answers the access token to send for a connection, from memory
// while it is fresh, refreshing it (or fetching a new client-credentials
// token) when it expires within Skew. Concurrent callers that need a
// refresh share one token request (singleflight), and the stored token is
// replaced only if its generation is still the one that was refreshed, so
// that a second process cannot overwrite a newer token with an older one.
// A rotated refresh token is committed before the new access token is
// handed out. Refresh serves the "upstream answered 401" rule: one refresh,
// then the caller retries once. A provider answering invalid_grant marks
// the connection reauth_required and records events.ConnectionReauthRequired
// in the same transaction.
//
// The protocol work (authorization URL, PKCE, code exchange, refresh,
// client credentials, client authentication) is golang.org/x/oauth2's.
// Every request to a provider goes through the HTTP client the Manager is
// given (the egress guard's), never follows a redirect, and no token,
// code, verifier or client secret reaches an error message or a log line.
package oauthconn

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// Grants a connector may declare.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// How the client authenticates at the token endpoint.
const (
	// ClientAuthBasic sends client id and secret in an HTTP Basic
	// Authorization header (RFC 6749 §2.3.1; the default).
	ClientAuthBasic = "basic"
	// ClientAuthBody sends them as client_id and client_secret form fields.
	ClientAuthBody = "body"
)

// Connection statuses.
const (
	// StatusPending: an authorization was started and has not completed.
	StatusPending = "pending"
	// StatusActive: the connection holds tokens that work (or refresh).
	StatusActive = "active"
	// StatusReauthRequired: the provider refused the refresh token; the
	// account must be connected again through /connect.
	StatusReauthRequired = "reauth_required"
)

// Defaults.
const (
	// DefaultSkew is how long before expiry a token is refreshed.
	DefaultSkew = 60 * time.Second
	// StateTTL is how long an authorization may take.
	StateTTL = 10 * time.Minute
	// MaxPendingStates bounds the authorizations in progress at once.
	MaxPendingStates = 1000
	// DefaultTokenTimeout bounds one request to a token endpoint.
	DefaultTokenTimeout = 30 * time.Second
)

// Buckets this package uses (declared in store.Buckets).
const (
	// StatesBucket holds authorizations in progress, keyed by the SHA-256
	// of their state.
	StatesBucket = "oauth_states"
	// TokensBucket holds each OAuth connection's non-secret token record,
	// keyed "<connector>/<connection>"; the tokens themselves are sealed
	// in the vault under SecretRef.
	TokensBucket = "oauth_tokens"
)

// Client is a connector's OAuth 2.0 client, as the connector declares it.
type Client struct {
	// Connector is the connector's name.
	Connector string
	// Grant is authorization_code or client_credentials.
	Grant string
	// AuthorizationURL is the provider's authorization endpoint.
	AuthorizationURL string
	// TokenURL is the provider's token endpoint.
	TokenURL string
	// ClientID and ClientSecret identify the client to the provider.
	ClientID, ClientSecret string
	// Scopes are requested at authorization (or client-credentials) time.
	Scopes []string
	// AuthParams are extra query parameters of the authorization URL
	// (e.g. audience, prompt, access_type).
	AuthParams map[string]string
	// TokenParams are extra form parameters of the code exchange and the
	// client-credentials request (e.g. audience, resource).
	TokenParams map[string]string
	// ClientAuth is basic (default) or body.
	ClientAuth string
	// RedirectURLs are where a completed authorization may send the
	// browser back to (exact match).
	RedirectURLs []string
}

// Lookup returns the OAuth 2.0 client of a connector, read in tx:
// errs.NotFound when there is no such connector, errs.Invalid when it does
// not use OAuth 2.0.
type Lookup func(tx store.Tx, connector string) (Client, error)

// Manager runs the authorization flow and serves fresh tokens.
type Manager struct {
	store  store.Store
	vault  *vault.Vault
	events events.Recorder
	lookup Lookup
	http   *http.Client
	log    *slog.Logger
	now    func() time.Time
	skew   time.Duration
	hooks  Hooks

	id      string // this Manager's lease owner id
	flights singleflight.Group
	mu      sync.Mutex
	cache   map[string]cached
}

// Hooks let the owner of connection records follow the OAuth state; all
// run inside the write transaction that changes it. Any may be nil.
type Hooks struct {
	// Status runs when a connection's status is set: pending when an
	// authorization starts for a connection without an OAuth record,
	// active when the callback stored tokens or a first client-credentials
	// token was fetched, reauth_required when the grant was lost (before
	// EventData). The owner creates the connection when it has none.
	Status func(tx store.Tx, connector, connection, status string) error
	// EventData returns the connection as the API shows it, for the
	// connection.reauth_required event; the Status view when nil.
	EventData func(tx store.Tx, connector, connection string) (any, error)
}

// Options are what New needs.
type Options struct {
	Store  store.Store
	Vault  *vault.Vault
	Events events.Recorder
	// Lookup finds a connector's OAuth client.
	Lookup Lookup
	// HTTPClient makes every request to a provider (the egress guard's);
	// redirects are never followed.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Skew is how long before expiry tokens are refreshed (DefaultSkew when 0).
	Skew time.Duration
	// Now is the clock (time.Now when nil).
	Now   func() time.Time
	Hooks Hooks
	// Owner is this replica's id, written into a connection's token record
	// while this Manager refreshes it (a random id when empty).
	Owner string
}

// New returns a Manager.
func New(o Options) *Manager {
	m := &Manager{
		store: o.Store, vault: o.Vault, events: o.Events, lookup: o.Lookup,
		log: o.Logger, now: o.Now, skew: o.Skew, hooks: o.Hooks,
		cache: map[string]cached{}, id: o.Owner,
	}
	if m.id == "" {
		m.id = newState()[:16]
	}
	if m.events == nil {
		m.events = events.Nop{}
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.skew <= 0 {
		m.skew = DefaultSkew
	}
	hc := http.Client{Timeout: DefaultTokenTimeout}
	if o.HTTPClient != nil {
		hc = *o.HTTPClient
	}
	// A token endpoint that redirects would have the client's credentials
	// re-sent elsewhere (307/308 keep the body): never follow.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if hc.Timeout == 0 {
		hc.Timeout = DefaultTokenTimeout
	}
	m.http = &hc
	return m
}

// Skew is how long before expiry a token is refreshed.
func (m *Manager) Skew() time.Duration { return m.skew }

// record is the non-secret state of one OAuth connection.
type record struct {
	Connector       string     `json:"connector"`
	Connection      string     `json:"connection"`
	Grant           string     `json:"grant"`
	Status          string     `json:"status"`
	Scopes          []string   `json:"scopes,omitempty"`
	ExpiresAt       *time.Time `json:"expiresAt,omitempty"`
	LastRefreshedAt *time.Time `json:"lastRefreshedAt,omitempty"`
	// Reason is the provider's error code that made the connection
	// reauth_required (e.g. invalid_grant).
	Reason string `json:"reason,omitempty"`
	// Generation increments on every change of the stored tokens; a
	// refresh stores its result only if it is unchanged.
	Generation uint64 `json:"generation"`
	// LeaseOwner and LeaseUntil mark a token request in progress (by the
	// Manager with that id, until then): other processes wait for its
	// result instead of spending the same refresh token.
	LeaseOwner string     `json:"leaseOwner,omitempty"`
	LeaseUntil *time.Time `json:"leaseUntil,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
}

// secret is what the vault holds for a connection.
type secret struct {
	AccessToken  string `json:"accessToken"`
	RefreshToken string `json:"refreshToken,omitempty"`
}

// cached is an access token held in memory with the record it belongs to
// (generation and lifetime), so that a fresh one is served without reading
// the store.
type cached struct {
	access     string
	generation uint64
	rec        record
}

func cacheOf(rec record, access string) cached {
	return cached{access: access, generation: rec.Generation, rec: record{ExpiresAt: rec.ExpiresAt, LastRefreshedAt: rec.LastRefreshedAt}}
}

// Status is an OAuth connection's state as the API shows it: never a token.
type Status struct {
	// Status is pending, active or reauth_required.
	Status string `json:"status"`
	// Scopes are the scopes the provider granted (those requested when it
	// did not say).
	Scopes []string `json:"scopes,omitempty"`
	// ExpiresAt is when the current access token expires (absent when the
	// provider gave no lifetime).
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// LastRefreshedAt is when the current access token was obtained.
	LastRefreshedAt *time.Time `json:"lastRefreshedAt,omitempty"`
	// Reason is the provider's error code that made it reauth_required.
	Reason string `json:"reason,omitempty"`
}

// EventData is the data of a connection.reauth_required event when no
// Hooks.EventData is set.
type EventData struct {
	Connector  string `json:"connector"`
	Connection string `json:"connection"`
	Status
}

func (r *record) status() *Status {
	return &Status{Status: r.Status, Scopes: slices.Clone(r.Scopes), ExpiresAt: r.ExpiresAt, LastRefreshedAt: r.LastRefreshedAt, Reason: r.Reason}
}

func tokenKey(connector, connection string) string { return connector + "/" + connection }

// SecretRef is the vault ref of a connection's OAuth tokens; it lives
// under the connector's secret prefix ("connector/<name>/"), so deleting
// the connector deletes it.
func SecretRef(connector, connection string) string {
	return "connector/" + connector + "/connections/" + connection + "/oauth"
}

// Status returns the OAuth state of a connection read in tx, or nil when
// it has none.
func (m *Manager) Status(tx store.Tx, connector, connection string) (*Status, error) {
	rec, ok, err := getRecord(tx, connector, connection)
	if err != nil || !ok {
		return nil, err
	}
	return rec.status(), nil
}

// Forget deletes a connection's OAuth record and tokens inside tx (the
// connection is being deleted).
func (m *Manager) Forget(tx store.Tx, connector, connection string) error {
	if err := tx.Delete(TokensBucket, tokenKey(connector, connection)); err != nil {
		return err
	}
	return m.deleteSecret(tx, connector, connection)
}

// deleteSecret deletes a connection's sealed tokens inside tx and, once tx
// commits, their copy in memory.
func (m *Manager) deleteSecret(tx store.Tx, connector, connection string) error {
	if err := m.vault.Delete(tx, SecretRef(connector, connection)); err != nil {
		return err
	}
	key := tokenKey(connector, connection)
	tx.OnCommit(func() { m.drop(key) })
	return nil
}

// ReasonConnectorChanged is the reason of a connection made
// reauth_required because its connector now sends tokens somewhere new.
const ReasonConnectorChanged = "connector_changed"

// DropTokens deletes a connection's tokens inside tx because its connector
// now sends them (or fetches them) somewhere new. With reauth the record
// stays, reauth_required (reason connector_changed), so that the next call
// says to reconnect; without, the record goes too (client_credentials
// tokens are fetched anew on next use). The caller records the event.
func (m *Manager) DropTokens(tx store.Tx, connector, connection string, reauth bool) error {
	if !reauth {
		return m.Forget(tx, connector, connection)
	}
	rec, ok, err := getRecord(tx, connector, connection)
	if err != nil {
		return err
	}
	if !ok {
		rec = record{Connector: connector, Connection: connection, Grant: GrantAuthorizationCode, CreatedAt: m.now().UTC()}
	}
	rec.Status, rec.Reason = StatusReauthRequired, ReasonConnectorChanged
	rec.LeaseOwner, rec.LeaseUntil, rec.ExpiresAt = "", nil, nil
	rec.Generation++
	rec.UpdatedAt = m.now().UTC()
	if err := store.PutJSON(tx, TokensBucket, tokenKey(connector, connection), rec); err != nil {
		return err
	}
	return m.deleteSecret(tx, connector, connection)
}

// ForgetConnector deletes every OAuth record and pending authorization of
// a connector inside tx (the connector is being deleted).
func (m *Manager) ForgetConnector(tx store.Tx, connector string) error {
	var keys []string
	if err := tx.Scan(TokensBucket, connector+"/", "", func(k string, _ []byte) (bool, error) {
		keys = append(keys, k)
		return true, nil
	}); err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.Delete(TokensBucket, k); err != nil {
			return err
		}
		key := k
		tx.OnCommit(func() { m.drop(key) })
	}
	if err := m.vault.DeletePrefix(tx, "connector/"+connector+"/connections/"); err != nil {
		return err
	}
	var states []string
	if err := tx.Scan(StatesBucket, "", "", func(k string, v []byte) (bool, error) {
		var p pending
		if json.Unmarshal(v, &p) == nil && p.Connector == connector {
			states = append(states, k)
		}
		return true, nil
	}); err != nil {
		return err
	}
	for _, k := range states {
		if err := tx.Delete(StatesBucket, k); err != nil {
			return err
		}
	}
	return nil
}

func getRecord(tx store.Tx, connector, connection string) (record, bool, error) {
	var r record
	err := store.GetJSON(tx, TokensBucket, tokenKey(connector, connection), &r)
	switch {
	case err == nil:
		return r, true, nil
	case errs.KindOf(err) == errs.NotFound:
		return r, false, nil
	}
	return r, false, err
}

func (m *Manager) getSecret(tx store.Tx, connector, connection string) (secret, error) {
	var s secret
	b, err := m.vault.Get(tx, SecretRef(connector, connection))
	if err != nil || b == nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("decode OAuth tokens of %s/%s: %w", connector, connection, err)
	}
	return s, nil
}

func (m *Manager) putSecret(tx store.Tx, connector, connection string, s secret) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return m.vault.Put(tx, SecretRef(connector, connection), b)
}

func (m *Manager) remember(key string, c cached) {
	m.mu.Lock()
	m.cache[key] = c
	m.mu.Unlock()
}

func (m *Manager) recall(key string) (cached, bool) {
	m.mu.Lock()
	c, ok := m.cache[key]
	m.mu.Unlock()
	return c, ok
}

func (m *Manager) drop(key string) {
	m.mu.Lock()
	delete(m.cache, key)
	m.mu.Unlock()
}
