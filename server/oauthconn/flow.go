package oauthconn

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ids"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// pending is an authorization in progress, stored under the SHA-256 of
// its state (the state itself is never stored).
type pending struct {
	Connector  string `json:"connector"`
	Connection string `json:"connection"`
	// Redirect is where the browser goes when the authorization completes
	// ("" for none).
	Redirect string `json:"redirect,omitempty"`
	// CallbackURL is the redirect_uri sent to the provider; the code
	// exchange must send the same.
	CallbackURL string `json:"callbackUrl"`
	// ReturnTo is a page of this server the browser goes back to whatever
	// the outcome (the hosted connect page); it takes precedence over
	// Redirect.
	ReturnTo string `json:"returnTo,omitempty"`
	// Verifier is the PKCE code verifier, sealed by the vault.
	Verifier  []byte    `json:"verifier"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// BeginInput starts an authorization.
type BeginInput struct {
	// Connector and Connection name the account being connected.
	Connector, Connection string
	// Redirect is where the browser is sent after the callback; it must
	// be in the connector's redirect list. Empty: the callback answers
	// itself.
	Redirect string
	// CallbackURL is this server's /v1/oauth/callback URL.
	CallbackURL string
	// ReturnTo is a page of this server to send the browser back to,
	// success or failure (see Connected.ReturnTo); not checked against the
	// connector's redirect list, so never taken from a caller.
	ReturnTo string
}

// Begun is a started authorization.
type Begun struct {
	// AuthorizationURL is where the browser must go (state, PKCE
	// challenge, scopes, redirect_uri and extra parameters included).
	AuthorizationURL string
	// ExpiresAt is when the state expires.
	ExpiresAt time.Time
}

func stateKey(state string) string { return ids.Digest(state) }

func newState() string { return ids.Secret("") }

// Begin stores a single-use state bound to connector and connection and
// returns the provider's authorization URL with the state and the PKCE S256
// challenge. A connection without an OAuth record is created pending.
func (m *Manager) Begin(ctx context.Context, in BeginInput) (Begun, error) {
	if !auth.ValidConnectionName(in.Connection) {
		return Begun{}, errs.Problems("invalid connection name", []errs.Problem{{Field: "connection",
			Problem: "must match " + auth.ConnectionNamePattern}})
	}
	if u, err := url.Parse(in.CallbackURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Begun{}, errs.E(errs.Internal, "callback URL %q is not an absolute http(s) URL; set publicUrl (SWITCHBOARD_PUBLIC_URL)", in.CallbackURL)
	}
	state, verifier := newState(), oauth2.GenerateVerifier()
	key := stateKey(state)
	sealed, err := m.vault.Seal(StatesBucket+"/"+key, []byte(verifier))
	if err != nil {
		return Begun{}, err
	}
	now := m.now().UTC()
	p := pending{Connector: in.Connector, Connection: in.Connection, Redirect: in.Redirect, ReturnTo: in.ReturnTo,
		CallbackURL: in.CallbackURL, Verifier: sealed, CreatedAt: now, ExpiresAt: now.Add(StateTTL)}
	var c Client
	err = m.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if c, err = m.lookup(tx, in.Connector); err != nil {
			return err
		}
		if c.Grant != GrantAuthorizationCode {
			return errs.E(errs.Invalid, "connector %q uses the %s grant; only authorization_code connectors are connected through /connect (client_credentials tokens are fetched on first use)", in.Connector, c.Grant)
		}
		if c.AuthorizationURL == "" {
			return errs.E(errs.Invalid, "connector %q has no auth.authorizationUrl", in.Connector)
		}
		if in.Redirect != "" && !slices.Contains(c.RedirectURLs, in.Redirect) {
			return errs.E(errs.Invalid, "redirect %q is not in the redirect list of connector %q (auth.redirectUrls); add it there or omit redirect", in.Redirect, in.Connector).
				WithDetails(map[string]any{"field": "redirect"})
		}
		n, err := sweepStates(tx, now)
		if err != nil {
			return err
		}
		if n >= MaxPendingStates {
			return errs.E(errs.RateLimited, "too many authorizations in progress (at most %d); retry when some complete or expire", MaxPendingStates).
				WithDetails(map[string]any{"limit": MaxPendingStates})
		}
		if err := store.PutJSON(tx, StatesBucket, key, p); err != nil {
			return err
		}
		_, ok, err := getRecord(tx, in.Connector, in.Connection)
		if err != nil || ok {
			return err
		}
		rec := record{Connector: in.Connector, Connection: in.Connection, Grant: GrantAuthorizationCode,
			Status: StatusPending, CreatedAt: now, UpdatedAt: now}
		if err := store.PutJSON(tx, TokensBucket, tokenKey(in.Connector, in.Connection), rec); err != nil {
			return err
		}
		if m.hooks.Status != nil {
			return m.hooks.Status(tx, in.Connector, in.Connection, StatusPending)
		}
		return nil
	})
	if err != nil {
		return Begun{}, err
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	for _, k := range sortedKeys(c.AuthParams) {
		opts = append(opts, oauth2.SetAuthURLParam(k, c.AuthParams[k]))
	}
	m.log.InfoContext(ctx, "oauth authorization started", "connector", in.Connector, "connection", in.Connection)
	return Begun{AuthorizationURL: c.config(in.CallbackURL).AuthCodeURL(state, opts...), ExpiresAt: p.ExpiresAt}, nil
}

// sweepStates deletes expired authorizations and counts the others.
func sweepStates(tx store.Tx, now time.Time) (int, error) {
	var expired []string
	n := 0
	err := tx.Scan(StatesBucket, "", "", func(k string, v []byte) (bool, error) {
		var p pending
		if err := json.Unmarshal(v, &p); err != nil || !now.Before(p.ExpiresAt) {
			expired = append(expired, k)
		} else {
			n++
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range expired {
		if err := tx.Delete(StatesBucket, k); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// CallbackInput is what the provider sent to /v1/oauth/callback.
type CallbackInput struct {
	State, Code string
	// Error and ErrorDescription are the provider's error response
	// (RFC 6749 §4.1.2.1), e.g. access_denied when consent was denied.
	Error, ErrorDescription string
}

// Connected is a completed authorization.
type Connected struct {
	Connector, Connection string
	// Redirect is where the browser goes now ("" for none).
	Redirect string
	// ReturnTo is the BeginInput's ReturnTo: Complete sets it (with
	// Connector and Connection) on failures too, once the state is known.
	ReturnTo string
	Status   Status
}

// Complete consumes the state of an authorization, exchanges the code with
// the PKCE verifier, seals the tokens and marks the connection active.
// A missing, unknown, used or expired state, a denied consent or a failed
// exchange stores nothing (the state is consumed all the same).
func (m *Manager) Complete(ctx context.Context, in CallbackInput) (Connected, error) {
	if in.State == "" {
		return Connected{}, errs.E(errs.Invalid, "the callback has no state parameter; start the authorization with GET /v1/connectors/{name}/connect")
	}
	if len(in.State) > 512 || len(in.Code) > 4096 || len(in.Error) > 256 || len(in.ErrorDescription) > 2048 {
		return Connected{}, errs.E(errs.Invalid, "callback parameters exceed their limits (state 512, code 4096, error 256, error_description 2048 bytes)")
	}
	key := stateKey(in.State)
	now := m.now().UTC()
	var (
		p        pending
		c        Client
		verifier []byte
		expired  bool
		failed   error
	)
	err := m.store.Update(ctx, func(tx store.Tx) error {
		// The function may run again (a serialization failure): start over.
		p, c, verifier, expired, failed = pending{}, Client{}, nil, false, nil
		if err := store.GetJSON(tx, StatesBucket, key, &p); err != nil {
			if errs.KindOf(err) == errs.NotFound {
				return errs.E(errs.Invalid, "unknown or already used state: each authorization can complete once; start again with GET /v1/connectors/{name}/connect")
			}
			return err
		}
		if err := tx.Delete(StatesBucket, key); err != nil {
			return err
		}
		if !now.Before(p.ExpiresAt) {
			expired = true
			return nil // commit the deletion
		}
		// The state is consumed whatever happens next: errors below are
		// reported after the deletion commits.
		var err error
		if verifier, err = m.vault.Open(StatesBucket+"/"+key, p.Verifier); err != nil {
			failed = fmt.Errorf("open PKCE verifier: %w", err)
			return nil
		}
		c, failed = m.lookup(tx, p.Connector)
		return nil
	})
	if err == nil {
		err = failed
	}
	back := Connected{Connector: p.Connector, Connection: p.Connection, ReturnTo: p.ReturnTo}
	if err != nil {
		return back, err
	}
	retry := fmt.Sprintf("GET /v1/connectors/%s/connect?connection=%s", p.Connector, p.Connection)
	details := map[string]any{"connector": p.Connector, "connection": p.Connection}
	if expired {
		return back, errs.E(errs.Invalid, "the authorization of connection %q of connector %q expired (it must complete within %s); start again with %s",
			p.Connection, p.Connector, StateTTL, retry).WithDetails(details)
	}
	if c.Grant != GrantAuthorizationCode {
		return back, errs.E(errs.Invalid, "connector %q no longer uses the authorization_code grant", p.Connector).WithDetails(details)
	}
	if in.Error != "" {
		details["oauthError"] = in.Error
		if in.Error == "access_denied" {
			return back, errs.E(errs.Forbidden, "consent was denied at the provider for connection %q of connector %q (access_denied); nothing was stored. To connect, start again with %s",
				p.Connection, p.Connector, retry).WithDetails(details)
		}
		msg := fmt.Sprintf("the provider refused the authorization of connection %q of connector %q (%s", p.Connection, p.Connector, clip(in.Error, 64))
		if in.ErrorDescription != "" {
			msg += ": " + clip(in.ErrorDescription, 300)
		}
		return back, errs.E(errs.Upstream, "%s); nothing was stored. Start again with %s", msg, retry).WithDetails(details)
	}
	if in.Code == "" {
		return back, errs.E(errs.Invalid, "the callback has neither code nor error; nothing was stored. Start again with %s", retry).WithDetails(details)
	}
	if p.Redirect != "" && !slices.Contains(c.RedirectURLs, p.Redirect) {
		return back, errs.E(errs.Invalid, "redirect %q was removed from the redirect list of connector %q; nothing was stored", p.Redirect, p.Connector).WithDetails(details)
	}

	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(string(verifier))}
	for _, k := range sortedKeys(c.TokenParams) {
		opts = append(opts, oauth2.SetAuthURLParam(k, c.TokenParams[k]))
	}
	tok, err := c.config(p.CallbackURL).Exchange(m.clientCtx(ctx), in.Code, opts...)
	if err != nil {
		return back, m.tokenError(err, c, "exchanging the authorization code of connection "+p.Connection, "nothing was stored. Start again with "+retry,
			secret{}, in.Code, string(verifier))
	}

	var st Status
	err = m.store.Update(ctx, func(tx store.Tx) error {
		rec, ok, err := getRecord(tx, p.Connector, p.Connection)
		if err != nil {
			return err
		}
		if !ok {
			rec = record{Connector: p.Connector, Connection: p.Connection, CreatedAt: now}
		}
		rec.Grant = GrantAuthorizationCode
		rec.Reason = ""
		m.applyToken(&rec, tok, c, nil, now)
		if err := m.putSecret(tx, p.Connector, p.Connection, secret{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken}); err != nil {
			return err
		}
		if err := store.PutJSON(tx, TokensBucket, tokenKey(p.Connector, p.Connection), rec); err != nil {
			return err
		}
		if m.hooks.Status != nil {
			if err := m.hooks.Status(tx, p.Connector, p.Connection, StatusActive); err != nil {
				return err
			}
		}
		st = *rec.status()
		key, c := tokenKey(p.Connector, p.Connection), cacheOf(rec, tok.AccessToken)
		tx.OnCommit(func() { m.remember(key, c) })
		return nil
	})
	if err != nil {
		return back, err
	}
	m.log.InfoContext(ctx, "oauth connection connected", "connector", p.Connector, "connection", p.Connection,
		"refreshable", tok.RefreshToken != "")
	back.Redirect, back.Status = p.Redirect, st
	return back, nil
}

// applyToken records a new token in rec: active, next generation, granted
// scopes (the previous or requested ones when the provider does not say),
// expiry and the time it was obtained.
func (m *Manager) applyToken(rec *record, tok *oauth2.Token, c Client, previous []string, now time.Time) {
	rec.Status = StatusActive
	rec.Generation++
	rec.UpdatedAt = now
	rec.LastRefreshedAt = &now
	rec.LeaseOwner, rec.LeaseUntil = "", nil
	rec.ExpiresAt = nil
	switch {
	case tok.ExpiresIn > 0:
		// Measured on the Manager's clock, like every freshness check.
		exp := now.Add(time.Duration(tok.ExpiresIn) * time.Second).Truncate(time.Second)
		rec.ExpiresAt = &exp
	case !tok.Expiry.IsZero():
		exp := tok.Expiry.UTC().Truncate(time.Second)
		rec.ExpiresAt = &exp
	}
	switch s, _ := tok.Extra("scope").(string); {
	case strings.TrimSpace(s) != "":
		rec.Scopes = strings.Fields(s)
	case len(previous) > 0:
		rec.Scopes = previous
	default:
		rec.Scopes = slices.Clone(c.Scopes)
	}
}

// config is the x/oauth2 configuration of the client.
func (c Client) config(redirectURI string) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	if c.ClientAuth == ClientAuthBody {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID:     c.ClientID,
		ClientSecret: c.ClientSecret,
		Endpoint:     oauth2.Endpoint{AuthURL: c.AuthorizationURL, TokenURL: c.TokenURL, AuthStyle: style},
		RedirectURL:  redirectURI,
		Scopes:       c.Scopes,
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
