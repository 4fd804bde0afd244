// Package connect runs connect sessions: an application's backend creates
// a short-lived, single-use session bound to one connector and connection,
// and the end user it sends to the session's page enters their credentials
// there (or authorizes through OAuth 2.0), without a Switchboard
// credential of their own. Only a hash of the session's token is stored;
// the token travels once, in the url answered on create.
package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ids"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// Buckets: sessions by id, and the id of each by its token's hash.
const (
	Bucket       = "connect_sessions"
	TokensBucket = "connect_session_tokens"
)

// Session lifetimes.
const (
	DefaultTTL = 30 * time.Minute
	MinTTL     = time.Minute
	MaxTTL     = 24 * time.Hour
)

// Session statuses.
const (
	StatusPending   = "pending"
	StatusCompleted = "completed"
	StatusExpired   = "expired"
)

// MaxOpenSessions bounds the sessions not yet completed nor expired.
const MaxOpenSessions = 10000

// Session is a connect session as stored (never its token).
type Session struct {
	ID          string `json:"id"`
	Connector   string `json:"connector"`
	Connection  string `json:"connection"`
	RedirectURL string `json:"redirectUrl,omitempty"`
	// TokenHash is the hex SHA-256 of the session's token.
	TokenHash string `json:"tokenHash"`
	// CreatedBy is the id of the credential that created the session.
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// AuthorizingSince is when the page last started an OAuth 2.0
	// authorization; only a connection activated after it completes the
	// session.
	AuthorizingSince *time.Time `json:"authorizingSince,omitempty"`
	CompletedAt      *time.Time `json:"completedAt,omitempty"`
}

// Status is pending, completed or expired at now.
func (s Session) Status(now time.Time) string {
	switch {
	case s.CompletedAt != nil:
		return StatusCompleted
	case !now.Before(s.ExpiresAt):
		return StatusExpired
	}
	return StatusPending
}

// StatusOf is sess's status now.
func (s *Sessions) StatusOf(sess Session) string { return sess.Status(s.now()) }

// Runner runs actions (*connectors.Invoker).
type Runner interface {
	Run(ctx context.Context, in connectors.RunInput) (connectors.RunResult, error)
}

// OAuth starts authorizations and reports OAuth 2.0 connections
// (*oauthconn.Manager).
type OAuth interface {
	Begin(ctx context.Context, in oauthconn.BeginInput) (oauthconn.Begun, error)
	Status(tx store.Tx, connector, connection string) (*oauthconn.Status, error)
}

// Sessions creates and completes connect sessions.
type Sessions struct {
	Store       store.Store
	Connections *connectors.Connections
	Runner      Runner
	OAuth       OAuth
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (s *Sessions) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// CreateInput creates a session.
type CreateInput struct {
	Connector string
	// Connection defaults to connectors.DefaultConnection.
	Connection string
	// RedirectURL must be one of the connector's auth.redirectUrls.
	RedirectURL string
	// TTL defaults to DefaultTTL; MinTTL to MaxTTL.
	TTL time.Duration
	// CreatedBy is the creating credential's id.
	CreatedBy string
}

// Created is a new session and its token, which is never stored.
type Created struct {
	Session
	Token string
}

// Create stores a session bound to in.Connector and in.Connection. An
// unknown connector is errs.NotFound; one that takes no credentials from
// its users, a bad connection name, a redirect outside the connector's
// auth.redirectUrls or a TTL out of range is errs.Validation (details name
// each field); too many open sessions is errs.RateLimited.
func (s *Sessions) Create(ctx context.Context, in CreateInput) (Created, error) {
	if in.Connection == "" {
		in.Connection = connectors.DefaultConnection
	}
	if in.TTL == 0 {
		in.TTL = DefaultTTL
	}
	var ps []errs.Problem
	if p := auth.ConnectionNameProblem(in.Connection); p != "" {
		ps = append(ps, errs.Problem{Field: "connection", Problem: p})
	}
	if in.TTL < MinTTL || in.TTL > MaxTTL {
		ps = append(ps, errs.Problem{Field: "expiresIn", Problem: fmt.Sprintf("must be between %d and %d seconds, got %d", int(MinTTL.Seconds()), int(MaxTTL.Seconds()), int(in.TTL.Seconds()))})
	}
	if err := errs.Problems("invalid connect session", ps); err != nil {
		return Created{}, err
	}
	token := ids.Secret(tokenPrefix)
	now := s.now()
	sess := Session{
		ID: ids.New("cs_", now), Connector: in.Connector, Connection: in.Connection, RedirectURL: in.RedirectURL,
		TokenHash: hashToken(token), CreatedBy: in.CreatedBy, CreatedAt: now, ExpiresAt: now.Add(in.TTL),
	}
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		c, err := connectors.LoadConnector(tx, in.Connector)
		if err != nil {
			return err
		}
		if err := errs.Problems("invalid connect session", checkConnector(c, in.RedirectURL)); err != nil {
			return err
		}
		n, err := sweep(tx, now)
		if err != nil {
			return err
		}
		if n >= MaxOpenSessions {
			return errs.E(errs.RateLimited, "too many open connect sessions (at most %d); retry when some complete or expire", MaxOpenSessions).
				WithDetails(map[string]any{"limit": MaxOpenSessions})
		}
		if err := tx.Put(TokensBucket, sess.TokenHash, []byte(sess.ID)); err != nil {
			return err
		}
		return store.PutJSON(tx, Bucket, sess.ID, sess)
	})
	if err != nil {
		return Created{}, err
	}
	return Created{Session: sess, Token: token}, nil
}

// checkConnector lists why c cannot be connected through a session that
// returns to redirect.
func checkConnector(c connectors.Connector, redirect string) []errs.Problem {
	var ps []errs.Problem
	switch {
	case c.Auth.Type == connectors.AuthNone:
		ps = append(ps, errs.Problem{Field: "connector", Problem: fmt.Sprintf("connector %q uses auth type none: its actions run without a connection", c.Name)})
	case c.Auth.Type == connectors.AuthOAuth2 && c.Auth.Grant != connectors.GrantAuthorizationCode:
		ps = append(ps, errs.Problem{Field: "connector", Problem: fmt.Sprintf("connector %q uses the OAuth 2.0 %s grant: its tokens are fetched with the connector's client secret, no user connects an account", c.Name, c.Auth.Grant)})
	}
	if redirect != "" && !slices.Contains(c.Auth.RedirectURLs, redirect) {
		ps = append(ps, errs.Problem{Field: "redirectUrl", Problem: fmt.Sprintf("is not in the redirect list of connector %q (auth.redirectUrls); add it there or leave redirectUrl out", c.Name)})
	}
	return ps
}

// sweep deletes the sessions past their expiry (and completed ones a day
// after) and counts the open others.
func sweep(tx store.Tx, now time.Time) (int, error) {
	var gone []Session
	open := 0
	err := tx.Scan(Bucket, "", "", func(_ string, b []byte) (bool, error) {
		var s Session
		if err := json.Unmarshal(b, &s); err != nil {
			return false, err
		}
		switch {
		case s.CompletedAt != nil && now.Sub(*s.CompletedAt) > 24*time.Hour, s.CompletedAt == nil && now.Sub(s.ExpiresAt) > 24*time.Hour:
			gone = append(gone, s)
		case s.Status(now) == StatusPending:
			open++
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	for _, s := range gone {
		if err := tx.Delete(Bucket, s.ID); err != nil {
			return 0, err
		}
		if err := tx.Delete(TokensBucket, s.TokenHash); err != nil {
			return 0, err
		}
	}
	return open, nil
}

// Get returns a session by id: errs.NotFound when there is none (or it
// was swept, a day after it ended).
func (s *Sessions) Get(ctx context.Context, id string) (Session, error) {
	var out Session
	err := s.Store.View(ctx, func(tx store.Tx) error {
		return s.getTx(tx, id, &out)
	})
	return out, err
}

func (s *Sessions) getTx(tx store.Tx, id string, out *Session) error {
	err := store.GetJSON(tx, Bucket, id, out)
	if errors.Is(err, errs.NotFound) {
		return errs.E(errs.NotFound, "connect session %q not found", id)
	}
	return err
}

// Page is what the connect page shows: the session and its connector.
type Page struct {
	Session   Session
	Connector connectors.Connector
}

// Open returns the page of the session whose token is token: errs.NotFound
// for an unknown token, errs.Gone for a completed or expired session.
func (s *Sessions) Open(ctx context.Context, token string) (Page, error) {
	var p Page
	err := s.Store.View(ctx, func(tx store.Tx) error {
		var err error
		p, err = s.openTx(tx, token)
		return err
	})
	return p, err
}

func (s *Sessions) openTx(tx store.Tx, token string) (Page, error) {
	var p Page
	id := tx.Get(TokensBucket, hashToken(token))
	if id == nil {
		return p, errs.E(errs.NotFound, "this connect link is not valid: ask the application for a new one")
	}
	if err := s.getTx(tx, string(id), &p.Session); err != nil {
		return p, err
	}
	if err := usable(p.Session, s.now()); err != nil {
		return p, err
	}
	c, err := connectors.LoadConnector(tx, p.Session.Connector)
	if errors.Is(err, errs.NotFound) {
		return p, errs.E(errs.Gone, "connector %q of this connect link no longer exists", p.Session.Connector)
	}
	p.Connector = c
	return p, err
}

// usable refuses a completed or expired session.
func usable(sess Session, now time.Time) error {
	switch sess.Status(now) {
	case StatusCompleted:
		return errs.E(errs.Gone, "this connect link was already used: connection %q of %q is connected. Ask the application for a new link to connect again", sess.Connection, sess.Connector).
			WithDetails(map[string]any{"session": sess.ID, "status": StatusCompleted})
	case StatusExpired:
		return errs.E(errs.Gone, "this connect link expired at %s: ask the application for a new one", sess.ExpiresAt.Format(time.RFC3339)).
			WithDetails(map[string]any{"session": sess.ID, "status": StatusExpired})
	}
	return nil
}

// Completed is a completed session: where the browser goes now.
type Completed struct {
	Session Session
	// Connection is the stored connection.
	Connection connectors.Connection
	// Redirect is the session's redirectUrl with connector, connection and
	// status=connected in its query; "" without one.
	Redirect string
}

// Submit completes the session whose token is token with the end user's
// credentials: it checks them against the connector's auth, runs the
// connector's connectPage.testAction with them when it names one, then
// stores the connection and marks the session completed in one
// transaction. Failures store nothing and leave the session usable:
// invalid credentials are errs.Validation (fields named, never a value), a
// failed check says what the upstream answered (errs.Validation, details
// status), an OAuth 2.0 connector is errs.Invalid (it authorizes instead).
func (s *Sessions) Submit(ctx context.Context, token string, cred connectors.Credentials, requestID string) (Completed, error) {
	p, err := s.Open(ctx, token)
	if err != nil {
		return Completed{}, err
	}
	c := p.Connector
	if c.Auth.Type == connectors.AuthOAuth2 {
		return Completed{}, errs.E(errs.Invalid, "connector %q uses OAuth 2.0: connect with the authorization button, not a form", c.Name)
	}
	in := connectors.ConnectionInput{Name: p.Session.Connection, Credentials: cred}
	if err := s.Connections.Check(ctx, c.Name, in); err != nil {
		return Completed{}, err
	}
	if err := s.test(ctx, c, p.Session.Connection, &cred, requestID); err != nil {
		return Completed{}, err
	}
	var out Completed
	err = s.Store.Update(ctx, func(tx store.Tx) error {
		p, err := s.openTx(tx, token) // again: another request may have used it
		if err != nil {
			return err
		}
		conn, _, err := s.Connections.SaveTx(tx, p.Session.Connector, in)
		if err != nil {
			return err
		}
		out, err = s.complete(tx, p.Session, conn)
		return err
	})
	return out, err
}

// test runs c's test action on connection (with cred when not nil, else
// the stored credentials): errs.Validation saying what the upstream
// answered when it is not a success.
func (s *Sessions) test(ctx context.Context, c connectors.Connector, connection string, cred *connectors.Credentials, requestID string) error {
	if c.ConnectPage == nil || c.ConnectPage.TestAction == "" {
		return nil
	}
	action := c.ConnectPage.TestAction
	res, err := s.Runner.Run(ctx, connectors.RunInput{Connector: c.Name, Action: action, Connection: connection, Credentials: cred, RequestID: requestID})
	details := map[string]any{"testAction": action}
	var e *errs.Error
	switch {
	case errors.As(err, &e) && e.Kind == errs.Upstream:
		if st, ok := e.Details["status"]; ok {
			details["status"] = st
		}
		return errs.E(errs.Validation, "%s did not accept these credentials: checking them with action %q failed (%s). Check them and try again", displayName(c), action, e.Message).WithDetails(details)
	case errors.As(err, &e) && (e.Kind == errs.NotFound || e.Kind == errs.Invalid):
		return errs.E(errs.Validation, "the credentials could not be checked: test action %q of connector %q cannot run (%s); the connector's owner must fix connectPage.testAction", action, c.Name, e.Message).WithDetails(details)
	case err != nil:
		return err
	case res.Status < 200 || res.Status > 299:
		details["status"] = res.Status
		return errs.E(errs.Validation, "%s did not accept these credentials: checking them with action %q answered HTTP %d. Check them and try again", displayName(c), action, res.Status).WithDetails(details)
	}
	return nil
}

func displayName(c connectors.Connector) string {
	if c.DisplayName != "" {
		return c.DisplayName
	}
	return c.Name
}

// complete marks sess completed with conn inside tx.
func (s *Sessions) complete(tx store.Tx, sess Session, conn connectors.Connection) (Completed, error) {
	now := s.now()
	sess.CompletedAt = &now
	if err := store.PutJSON(tx, Bucket, sess.ID, sess); err != nil {
		return Completed{}, err
	}
	out := Completed{Session: sess, Connection: conn}
	if sess.RedirectURL != "" {
		out.Redirect = WithOutcome(sess.RedirectURL, sess.Connector, sess.Connection, "connected")
	}
	return out, nil
}

// WithOutcome is redirect with connector, connection and status in its
// query: where the browser returns to the application.
func WithOutcome(redirect, connector, connection, status string) string {
	u, err := url.Parse(redirect)
	if err != nil {
		return redirect
	}
	q := u.Query()
	q.Set("connector", connector)
	q.Set("connection", connection)
	q.Set("status", status)
	u.RawQuery = q.Encode()
	return u.String()
}

// AuthorizeInput starts the OAuth 2.0 authorization of a session.
type AuthorizeInput struct {
	Token string
	// CallbackURL is this server's /v1/oauth/callback URL.
	CallbackURL string
	// ReturnTo is the page the browser comes back to after the callback,
	// given the session id (ReturnPath).
	ReturnTo func(id string) string
}

// Authorize starts the authorization of the session's connection and
// returns the provider's URL: errs.Invalid when the connector does not
// use the authorization_code grant, else Open's and oauthconn's errors.
func (s *Sessions) Authorize(ctx context.Context, in AuthorizeInput) (string, error) {
	p, err := s.Open(ctx, in.Token)
	if err != nil {
		return "", err
	}
	c := p.Connector
	if c.Auth.Type != connectors.AuthOAuth2 || c.Auth.Grant != connectors.GrantAuthorizationCode {
		return "", errs.E(errs.Invalid, "connector %q uses auth type %s: enter the credentials in the form instead", c.Name, c.Auth.Type)
	}
	now := s.now()
	err = s.Store.Update(ctx, func(tx store.Tx) error {
		p, err := s.openTx(tx, in.Token)
		if err != nil {
			return err
		}
		p.Session.AuthorizingSince = &now
		return store.PutJSON(tx, Bucket, p.Session.ID, p.Session)
	})
	if err != nil {
		return "", err
	}
	b, err := s.OAuth.Begin(ctx, oauthconn.BeginInput{Connector: c.Name, Connection: p.Session.Connection,
		CallbackURL: in.CallbackURL, ReturnTo: in.ReturnTo(p.Session.ID)})
	if err != nil {
		return "", err
	}
	return b.AuthorizationURL, nil
}

// Return completes session id after its OAuth 2.0 authorization: the
// connection must have been activated since the page started it (else
// errs.Invalid). The test action, when the connector names one, runs
// with the new tokens first; its failure is errs.Validation and leaves the
// session open. A completed or expired session is errs.Gone.
func (s *Sessions) Return(ctx context.Context, id, requestID string) (Completed, error) {
	var (
		sess Session
		c    connectors.Connector
	)
	err := s.Store.View(ctx, func(tx store.Tx) error {
		if err := s.getTx(tx, id, &sess); err != nil {
			return err
		}
		if err := usable(sess, s.now()); err != nil {
			return err
		}
		var err error
		c, err = connectors.LoadConnector(tx, sess.Connector)
		if err != nil {
			return err
		}
		return s.authorizedTx(tx, sess)
	})
	if err != nil {
		return Completed{}, err
	}
	if err := s.test(ctx, c, sess.Connection, nil, requestID); err != nil {
		return Completed{}, err
	}
	var out Completed
	err = s.Store.Update(ctx, func(tx store.Tx) error {
		if err := s.getTx(tx, id, &sess); err != nil {
			return err
		}
		if err := usable(sess, s.now()); err != nil {
			return err
		}
		if err := s.authorizedTx(tx, sess); err != nil {
			return err
		}
		conn, err := connectors.LoadConnection(tx, sess.Connector, sess.Connection)
		if err != nil {
			return err
		}
		out, err = s.complete(tx, sess, conn)
		return err
	})
	return out, err
}

// authorizedTx checks that sess's connection was authorized since the
// page started the authorization.
func (s *Sessions) authorizedTx(tx store.Tx, sess Session) error {
	notYet := errs.E(errs.Invalid, "connection %q of %q has not been authorized through this connect link yet: use the button to connect", sess.Connection, sess.Connector)
	if sess.AuthorizingSince == nil {
		return notYet
	}
	st, err := s.OAuth.Status(tx, sess.Connector, sess.Connection)
	switch {
	case err != nil && !errors.Is(err, errs.NotFound):
		return err
	case st == nil || st.Status != oauthconn.StatusActive || st.LastRefreshedAt == nil || st.LastRefreshedAt.Before(*sess.AuthorizingSince):
		return notYet
	}
	return nil
}

// ReturnPath is the path of the page a session's authorization returns to.
func ReturnPath(id string) string { return "/connect/sessions/" + url.PathEscape(id) + "/return" }

// PagePath is the path of a session's connect page.
func PagePath(token string) string { return "/connect/" + token }

// tokenPrefix marks session tokens, so that a leaked one is recognisable.
const tokenPrefix = "sbcs_"

func hashToken(token string) string { return ids.Digest(strings.TrimSpace(token)) }
