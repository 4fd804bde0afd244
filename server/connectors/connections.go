package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// Connections.
//
// A connection is one account's credentials for a connector: an API key, a
// bearer token or a username and password (OAuth 2.0 connections are
// obtained through the authorization flow and add the states pending and
// reauth_required). Records live in the "connections" bucket under
// "<connector>/<name>"; the credentials are sealed in the vault under
// ConnectionSecretRef — below the connector's SecretPrefix, so that deleting
// the connector deletes them — and are write-only: no response, event, log
// line or error ever holds them.

// BucketConnections holds connection records by "<connector>/<name>".
const BucketConnections = "connections"

// DefaultConnection is the connection used when a caller names none.
const DefaultConnection = "default"

// Connection statuses.
const (
	// ConnectionActive connections can be used (static credentials always are).
	ConnectionActive = "active"
	// ConnectionPending OAuth 2.0 connections wait for the user's consent.
	ConnectionPending = "pending"
	// ConnectionReauthRequired connections cannot be used until their
	// credentials are supplied again: OAuth 2.0 connections that lost their
	// grant, and any connection whose connector was retargeted (see
	// Connections.CredentialsMovedTx).
	ConnectionReauthRequired = "reauth_required"
)

// MaxCredentialBytes bounds each credential field of a connection.
const MaxCredentialBytes = 4096

// ConnectionNamePattern is the syntax of connection names (the same as the
// OAuth flow's `connection` parameter).
const ConnectionNamePattern = auth.ConnectionNamePattern

// Connection is a connection as the API shows it: never its credentials.
type Connection struct {
	// Connector is the connector's name.
	Connector string `json:"connector"`
	// Name identifies the connection within its connector (NamePattern).
	Name string `json:"name"`
	// AuthType is the connector's auth type when the connection was made.
	AuthType string `json:"authType"`
	// Status is active, pending or reauth_required.
	Status string `json:"status"`
	// CreatedAt and UpdatedAt are UTC.
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Version starts at 1 and increments when the credentials are replaced.
	Version int64 `json:"version"`
}

// Credentials are a connection's secrets, opened for one call. Never log,
// return or wrap them in an error.
type Credentials struct {
	APIKey   string `json:"apiKey,omitempty"`
	Token    string `json:"token,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// Secrets lists the values that must never appear in a response, a log
// line or an error: every credential but the username.
func (c Credentials) Secrets() []string {
	var out []string
	for _, s := range []string{c.APIKey, c.Token, c.Password} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ConnectionInput creates or replaces a connection's credentials.
type ConnectionInput struct {
	// Name defaults to DefaultConnection.
	Name string
	Credentials
}

// ConnectionSecretRef is the vault ref of a connection's sealed static
// credentials (OAuth tokens live beside it, under ".../oauth").
func ConnectionSecretRef(connector, name string) string {
	return SecretPrefix(connector) + "connections/" + name + "/static"
}

func connectionKey(connector, name string) string { return connector + "/" + name }

// Connections stores connections and opens their credentials.
type Connections struct {
	// Store holds the records.
	Store store.Store
	// Vault seals the credentials.
	Vault *vault.Vault
	// Events records connection.created, connection.updated and
	// connection.deleted; none when nil.
	Events events.Recorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// OnDelete hooks run inside the transaction that deletes a connection
	// (e.g. to forget its OAuth tokens).
	OnDelete []func(tx store.Tx, connector, name string) error
	// OnCredentialsDropped hooks run inside the transaction that retargets
	// a connector, once per connection, to drop what other domains hold for
	// it (OAuth tokens): reauth says whether the connection must be
	// authorized again (authorization_code) rather than simply forgotten.
	OnCredentialsDropped []func(tx store.Tx, connector, name string, reauth bool) error
}

func (s *Connections) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Connections) events() events.Recorder {
	if s.Events == nil {
		return events.Nop{}
	}
	return s.Events
}

// validateCredentials checks in against the connector's auth: the fields
// its type needs, nothing else, and values that can travel where the
// connector sends them. Problems never quote a value.
func validateCredentials(c Connector, in ConnectionInput) []errs.Problem {
	var ps problems
	if p := auth.ConnectionNameProblem(in.Name); p != "" {
		ps.add("name", "%s", p)
	}
	given := map[string]string{"apiKey": in.APIKey, "token": in.Token, "username": in.Username, "password": in.Password}
	var needed, allowed []string
	switch c.Auth.Type {
	case AuthAPIKey:
		needed, allowed = []string{"apiKey"}, []string{"apiKey"}
	case AuthBearer:
		needed, allowed = []string{"token"}, []string{"token"}
	case AuthBasic:
		needed, allowed = []string{"username"}, []string{"username", "password"}
	case AuthNone:
		ps.add("", "connector %q uses auth type none: its actions run without a connection", c.Name)
		return ps
	case AuthOAuth2:
		if c.Auth.Grant != GrantClientCredentials {
			ps.add("", "connector %q uses OAuth 2.0: its connections are made by the authorization flow (GET /v1/connectors/%s/connect), not with static credentials", c.Name, c.Name)
			return ps
		}
		// client_credentials: a connection is a name for tokens fetched
		// with the connector's client secret; it takes no credentials.
		for _, f := range []string{"apiKey", "token", "username", "password"} {
			if given[f] != "" {
				ps.add(f, "does not apply: connector %q uses the OAuth 2.0 client_credentials grant; its tokens are fetched with the connector's client secret", c.Name)
			}
		}
		return ps
	default:
		ps.add("", "connector %q has auth type %q, which takes no static credentials", c.Name, c.Auth.Type)
		return ps
	}
	for _, f := range []string{"apiKey", "token", "username", "password"} {
		v := given[f]
		switch {
		case v == "" && slices.Contains(needed, f):
			ps.add(f, "is required: connector %q uses auth type %s", c.Name, c.Auth.Type)
		case v != "" && !slices.Contains(allowed, f):
			ps.add(f, "does not apply: connector %q uses auth type %s (it takes %s)", c.Name, c.Auth.Type, strings.Join(allowed, ", "))
		case len(v) > MaxCredentialBytes:
			ps.add(f, "must be at most %d bytes, got %d", MaxCredentialBytes, len(v))
		case strings.ContainsFunc(v, unicode.IsControl):
			ps.add(f, "must not contain control characters (CR, LF, NUL, ...)")
		case f == "username" && strings.Contains(v, ":"):
			ps.add(f, "must not contain ':' (HTTP Basic authentication separates username and password with it)")
		case f == "apiKey" && c.Auth.In == InCookie && !validCookieValue(c.Auth.Prefix+v):
			ps.add(f, "cannot be sent in a cookie: it (with the connector's prefix) contains a space, quote, comma, semicolon or backslash")
		}
	}
	return ps
}

// validCookieValue reports whether v is a cookie-octet string (RFC 6265).
func validCookieValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x21 || c == '"' || c == ',' || c == ';' || c == '\\' || c >= 0x7f {
			return false
		}
	}
	return true
}

// Create stores a new connection for connector at version 1 with its
// credentials sealed, and records connection.created. A name in use is
// errs.Conflict; credentials that do not fit the connector's auth an
// errs.Validation error listing every problem.
func (s *Connections) Create(ctx context.Context, connector string, in ConnectionInput) (Connection, error) {
	if in.Name == "" {
		in.Name = DefaultConnection
	}
	var out Connection
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		c, err := LoadConnector(tx, connector)
		if err != nil {
			return err
		}
		if err := errs.Problems("invalid connection", validateCredentials(c, in)); err != nil {
			return err
		}
		if tx.Get(BucketConnections, connectionKey(connector, in.Name)) != nil {
			return errs.E(errs.Conflict, "connection %q of connector %q already exists; replace its credentials with PUT /v1/connectors/%s/connections/%s or choose another name", in.Name, connector, connector, in.Name).
				WithDetails(map[string]any{"name": in.Name})
		}
		out, err = s.write(tx, c, nil, in)
		return err
	})
	if err != nil {
		return Connection{}, err
	}
	return out, nil
}

// Replace replaces the credentials of an existing connection, bumping its
// version. ifMatch, when not 0, must equal the current version
// (errs.PreconditionFailed otherwise).
func (s *Connections) Replace(ctx context.Context, connector, name string, in ConnectionInput, ifMatch int64) (Connection, error) {
	in.Name = name
	var out Connection
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		c, err := LoadConnector(tx, connector)
		if err != nil {
			return err
		}
		cur, err := LoadConnection(tx, connector, name)
		if err != nil {
			return err
		}
		if err := CheckVersion("connection", connector+"/"+name, cur.Version, ifMatch); err != nil {
			return err
		}
		if err := errs.Problems("invalid connection", validateCredentials(c, in)); err != nil {
			return err
		}
		out, err = s.write(tx, c, &cur, in)
		return err
	})
	if err != nil {
		return Connection{}, err
	}
	return out, nil
}

// Check validates in against connector's auth without storing anything:
// errs.NotFound for an unknown connector, errs.Validation listing every
// problem of the credentials.
func (s *Connections) Check(ctx context.Context, connector string, in ConnectionInput) error {
	return s.Store.View(ctx, func(tx store.Tx) error {
		c, err := LoadConnector(tx, connector)
		if err != nil {
			return err
		}
		return errs.Problems("invalid connection", validateCredentials(c, in))
	})
}

// SaveTx creates connection in.Name of connector inside tx, or replaces
// its credentials when it exists (recording connection.created or
// connection.updated); created says which. Credentials that do not fit the
// connector's auth are an errs.Validation error listing every problem.
func (s *Connections) SaveTx(tx store.Tx, connector string, in ConnectionInput) (out Connection, created bool, err error) {
	c, err := LoadConnector(tx, connector)
	if err != nil {
		return Connection{}, false, err
	}
	if err := errs.Problems("invalid connection", validateCredentials(c, in)); err != nil {
		return Connection{}, false, err
	}
	cur, err := LoadConnection(tx, connector, in.Name)
	switch {
	case errors.Is(err, errs.NotFound):
		out, err = s.write(tx, c, nil, in)
		return out, true, err
	case err != nil:
		return Connection{}, false, err
	}
	out, err = s.write(tx, c, &cur, in)
	return out, false, err
}

// write stores in's (validated) credentials as connection in.Name of c: a
// new one at version 1 (connection.created) when cur is nil, else cur with
// its version bumped (connection.updated).
func (s *Connections) write(tx store.Tx, c Connector, cur *Connection, in ConnectionInput) (Connection, error) {
	now := s.now()
	out, typ := Connection{Connector: c.Name, Name: in.Name, AuthType: c.Auth.Type, Status: ConnectionActive, CreatedAt: now, UpdatedAt: now, Version: 1}, events.ConnectionCreated
	if cur != nil {
		out, typ = *cur, events.ConnectionUpdated
		out.AuthType, out.Status, out.UpdatedAt, out.Version = c.Auth.Type, ConnectionActive, now, cur.Version+1
	}
	if err := s.put(tx, out, in.Credentials); err != nil {
		return Connection{}, err
	}
	return out, s.events().Record(tx, typ, out)
}

func (s *Connections) put(tx store.Tx, c Connection, cred Credentials) error {
	if cred == (Credentials{}) { // client_credentials: nothing to seal
		if err := s.Vault.Delete(tx, ConnectionSecretRef(c.Connector, c.Name)); err != nil {
			return err
		}
		return store.PutJSON(tx, BucketConnections, connectionKey(c.Connector, c.Name), c)
	}
	b, err := json.Marshal(cred)
	if err != nil {
		return err
	}
	if err := s.Vault.Put(tx, ConnectionSecretRef(c.Connector, c.Name), b); err != nil {
		return err
	}
	return store.PutJSON(tx, BucketConnections, connectionKey(c.Connector, c.Name), c)
}

// Get returns one connection (never its credentials).
func (s *Connections) Get(ctx context.Context, connector, name string) (Connection, error) {
	var out Connection
	err := s.Store.View(ctx, func(tx store.Tx) error {
		if _, err := LoadConnector(tx, connector); err != nil {
			return err
		}
		var err error
		out, err = LoadConnection(tx, connector, name)
		return err
	})
	return out, err
}

// LoadConnection reads a connection inside a transaction; errs.NotFound
// naming it when absent.
func LoadConnection(tx store.Tx, connector, name string) (Connection, error) {
	var c Connection
	if err := store.GetJSON(tx, BucketConnections, connectionKey(connector, name), &c); err != nil {
		if errors.Is(err, errs.NotFound) {
			return Connection{}, errs.E(errs.NotFound, "connection %q of connector %q not found", name, connector).
				WithDetails(map[string]any{"connector": connector, "connection": name})
		}
		return Connection{}, err
	}
	return c, nil
}

// OpenCredentials opens a connection's credentials inside a transaction.
func (s *Connections) OpenCredentials(tx store.Tx, connector, name string) (Credentials, error) {
	var cred Credentials
	b, err := s.Vault.Get(tx, ConnectionSecretRef(connector, name))
	if err != nil || b == nil {
		return cred, err
	}
	if err := json.Unmarshal(b, &cred); err != nil {
		return Credentials{}, fmt.Errorf("connection %s/%s: sealed credentials do not decode", connector, name)
	}
	return cred, nil
}

// List returns a page of a connector's connections in name order after
// cursor (a name), at most limit long; next is "" on the last page.
func (s *Connections) List(ctx context.Context, connector, cursor string, limit int) ([]Connection, string, error) {
	var (
		out  []Connection
		next string
	)
	err := s.Store.View(ctx, func(tx store.Tx) error {
		if _, err := LoadConnector(tx, connector); err != nil {
			return err
		}
		after := ""
		if cursor != "" {
			after = connectionKey(connector, cursor)
		}
		var err error
		out, next, err = store.Page[Connection](tx, BucketConnections, connector+"/", after, limit)
		if next != "" {
			next = strings.TrimPrefix(next, connector+"/")
		}
		return err
	})
	return out, next, err
}

// Delete deletes a connection and its credentials and records
// connection.deleted. ifMatch as in Replace.
func (s *Connections) Delete(ctx context.Context, connector, name string, ifMatch int64) error {
	return s.Store.Update(ctx, func(tx store.Tx) error {
		if _, err := LoadConnector(tx, connector); err != nil {
			return err
		}
		c, err := LoadConnection(tx, connector, name)
		if err != nil {
			return err
		}
		if err := CheckVersion("connection", connector+"/"+name, c.Version, ifMatch); err != nil {
			return err
		}
		return s.deleteTx(tx, c)
	})
}

func (s *Connections) deleteTx(tx store.Tx, c Connection) error {
	if err := s.Vault.Delete(tx, ConnectionSecretRef(c.Connector, c.Name)); err != nil {
		return err
	}
	for _, hook := range s.OnDelete {
		if err := hook(tx, c.Connector, c.Name); err != nil {
			return err
		}
	}
	if err := tx.Delete(BucketConnections, connectionKey(c.Connector, c.Name)); err != nil {
		return err
	}
	return s.events().Record(tx, events.ConnectionDeleted, c)
}

// SetStatusTx records an OAuth 2.0 connection's status inside tx,
// creating its record (without static credentials) when there is none:
// the OAuth flow calls it when an authorization starts (pending), when it
// completes (active) and when the grant is lost (reauth_required).
func (s *Connections) SetStatusTx(tx store.Tx, connector, name, status string) error {
	c, err := LoadConnector(tx, connector)
	if err != nil {
		return err
	}
	now := s.now()
	conn, err := LoadConnection(tx, connector, name)
	switch {
	case errors.Is(err, errs.NotFound):
		conn = Connection{Connector: connector, Name: name, AuthType: c.Auth.Type, Status: status, CreatedAt: now, UpdatedAt: now, Version: 1}
		if err := store.PutJSON(tx, BucketConnections, connectionKey(connector, name), conn); err != nil {
			return err
		}
		return s.events().Record(tx, events.ConnectionCreated, conn)
	case err != nil:
		return err
	case conn.Status == status && status != ConnectionActive:
		return nil
	}
	conn.Status, conn.UpdatedAt, conn.AuthType = status, now, c.Auth.Type
	if err := store.PutJSON(tx, BucketConnections, connectionKey(connector, name), conn); err != nil {
		return err
	}
	if status == ConnectionActive {
		// An authorization completed: the connection holds new tokens.
		return s.events().Record(tx, events.ConnectionUpdated, conn)
	}
	return nil
}

// DeleteConnectorTx deletes every connection of connector inside tx (an
// OnDeleteConnector hook of the Service), recording connection.deleted
// for each.
func (s *Connections) DeleteConnectorTx(tx store.Tx, connector string) error {
	all, err := connectorConnections(tx, connector)
	if err != nil {
		return err
	}
	for _, c := range all {
		if err := s.deleteTx(tx, c); err != nil {
			return err
		}
	}
	return nil
}

// connectorConnections reads every connection of connector inside tx.
func connectorConnections(tx store.Tx, connector string) ([]Connection, error) {
	var all []Connection
	after := ""
	for {
		page, next, err := store.Page[Connection](tx, BucketConnections, connector+"/", after, 256)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		after = next
	}
}

// CredentialsMovedTx is the Service's OnCredentialsMoved hook: connector c
// (as now stored) sends credentials somewhere new, so whatever its
// connections hold for the old target is dropped inside tx. Connections
// of a client_credentials connector stay active (the client secret was
// given again with the change; tokens are fetched anew); every other
// connection becomes reauth_required (its version stays) and
// connection.reauth_required is recorded for it. Supplying its
// credentials again (Replace, or /connect for authorization_code) makes it
// active again.
func (s *Connections) CredentialsMovedTx(tx store.Tx, c Connector, why string) error {
	all, err := connectorConnections(tx, c.Name)
	if err != nil {
		return err
	}
	clientCredentials := c.Auth.Type == AuthOAuth2 && c.Auth.Grant == GrantClientCredentials
	reauth := c.Auth.Type == AuthOAuth2 && c.Auth.Grant == GrantAuthorizationCode
	now := s.now()
	for _, conn := range all {
		if err := s.Vault.Delete(tx, ConnectionSecretRef(c.Name, conn.Name)); err != nil {
			return err
		}
		for _, hook := range s.OnCredentialsDropped {
			if err := hook(tx, c.Name, conn.Name, reauth); err != nil {
				return err
			}
		}
		status := ConnectionReauthRequired
		if clientCredentials {
			status = ConnectionActive
		}
		changed := conn.Status != status || conn.AuthType != c.Auth.Type
		// The version stays: it is the If-Match of the connection's own
		// writes, and a plan that moves the connector and sends the
		// credentials again in one apply must not fail on it.
		conn.Status, conn.AuthType, conn.UpdatedAt = status, c.Auth.Type, now
		if err := store.PutJSON(tx, BucketConnections, connectionKey(c.Name, conn.Name), conn); err != nil {
			return err
		}
		if status == ConnectionReauthRequired && changed {
			if err := s.events().Record(tx, events.ConnectionReauthRequired, ReauthEvent{Connection: conn, Reason: ReasonConnectorChanged, Why: why}); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReasonConnectorChanged is the reason of a connection made
// reauth_required because its connector was retargeted.
const ReasonConnectorChanged = "connector_changed"

// ReauthEvent is the data of connection.reauth_required when a connector
// was retargeted: the connection, the reason and what moved.
type ReauthEvent struct {
	Connection
	// Reason is ReasonConnectorChanged.
	Reason string `json:"reason"`
	// Why says what moved, e.g. "baseUrl moved from https://a:443 to https://b:443".
	Why string `json:"why"`
}
