package oauthconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/events"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// Token returns the access token to send for a connection: from memory
// while it is fresh (expires later than Skew from now, or never), else
// refreshed (authorization_code) or fetched (client_credentials, also on
// first use). A connection that is pending or reauth_required fails with
// errs.Conflict naming the connection and how to reconnect it.
func (m *Manager) Token(ctx context.Context, connector, connection string) (string, error) {
	key := tokenKey(connector, connection)
	now := m.now()
	var (
		access string
		done   bool
	)
	err := m.store.View(ctx, func(tx store.Tx) error {
		rec, ok, err := getRecord(tx, connector, connection)
		if err != nil || !ok {
			return err
		}
		if err := unusable(rec); err != nil {
			return err
		}
		if !m.fresh(rec.ExpiresAt, now) {
			return nil
		}
		if c, ok := m.recall(key); ok && c.generation == rec.Generation {
			access, done = c.access, true
			return nil
		}
		s, err := m.getSecret(tx, connector, connection)
		if err != nil || s.AccessToken == "" {
			return err
		}
		access, done = s.AccessToken, true
		m.remember(key, cached{access: s.AccessToken, generation: rec.Generation})
		return nil
	})
	if err != nil || done {
		return access, err
	}
	return m.renew(ctx, connector, connection, "")
}

// Refresh replaces an access token the upstream refused (401): it returns
// a token other than stale, refreshing (or refetching) unless another
// caller already did. The caller retries its request once with it.
func (m *Manager) Refresh(ctx context.Context, connector, connection, stale string) (string, error) {
	if stale == "" {
		return "", errs.E(errs.Internal, "oauthconn: Refresh needs the refused token")
	}
	return m.renew(ctx, connector, connection, stale)
}

// renew runs one token request per connection at a time: callers that
// arrive while it runs share its result. A caller holding a refused token
// that gets that same token back (it joined a flight that found the token
// still fresh) starts one more flight, which then refreshes.
func (m *Manager) renew(ctx context.Context, connector, connection, stale string) (string, error) {
	key := tokenKey(connector, connection)
	for attempt := 0; ; attempt++ {
		ch := m.flights.DoChan(key, func() (any, error) {
			// The flight outlives any one caller's cancellation; it is
			// bounded by the HTTP client's timeout.
			return m.renewNow(context.WithoutCancel(ctx), connector, connection, stale)
		})
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case r := <-ch:
			if r.Err != nil {
				return "", r.Err
			}
			access := r.Val.(string)
			if stale != "" && access == stale && attempt == 0 {
				continue
			}
			return access, nil
		}
	}
}

// renewNow re-reads the stored token (another caller or process may have
// renewed it meanwhile), requests a new one when it is still due (or is
// the refused one), and stores the result if the stored generation did not
// change in between.
func (m *Manager) renewNow(ctx context.Context, connector, connection, stale string) (string, error) {
	var (
		rec   record
		found bool
		sec   secret
		c     Client
	)
	now := m.now()
	err := m.store.View(ctx, func(tx store.Tx) error {
		var err error
		if rec, found, err = getRecord(tx, connector, connection); err != nil {
			return err
		}
		if found {
			if sec, err = m.getSecret(tx, connector, connection); err != nil {
				return err
			}
		}
		c, err = m.lookup(tx, connector)
		return err
	})
	if err != nil {
		return "", err
	}
	if found {
		if err := unusable(rec); err != nil {
			return "", err
		}
		if sec.AccessToken != "" {
			if stale == "" && m.fresh(rec.ExpiresAt, now) || stale != "" && sec.AccessToken != stale {
				m.remember(tokenKey(connector, connection), cached{access: sec.AccessToken, generation: rec.Generation})
				return sec.AccessToken, nil
			}
		}
	}

	var tok *oauth2.Token
	switch c.Grant {
	case GrantClientCredentials:
		cc := clientcredentials.Config{
			ClientID: c.ClientID, ClientSecret: c.ClientSecret, TokenURL: c.TokenURL, Scopes: c.Scopes,
			AuthStyle: c.config("").Endpoint.AuthStyle,
		}
		if len(c.TokenParams) > 0 {
			cc.EndpointParams = url.Values{}
			for k, v := range c.TokenParams {
				cc.EndpointParams.Set(k, v)
			}
		}
		tok, err = cc.Token(m.clientCtx(ctx))
		if err != nil {
			return "", m.tokenError(err, c, fmt.Sprintf("fetching a client-credentials token for connection %q", connection), "check the connector's tokenUrl, clientId and client secret", sec)
		}
	case GrantAuthorizationCode:
		if !found || sec.AccessToken == "" && sec.RefreshToken == "" {
			return "", errs.E(errs.Conflict, "connection %q of connector %q is not connected yet; connect it with GET /v1/connectors/%s/connect?connection=%s",
				connection, connector, connector, connection).WithDetails(map[string]any{"connector": connector, "connection": connection, "status": StatusPending})
		}
		if sec.RefreshToken == "" {
			return m.reauth(ctx, rec, "no_refresh_token", "the access token expired and the provider issued no refresh token")
		}
		tok, err = c.config("").TokenSource(m.clientCtx(ctx), &oauth2.Token{RefreshToken: sec.RefreshToken}).Token()
		if err != nil {
			var re *oauth2.RetrieveError
			if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
				return m.reauth(ctx, rec, "invalid_grant", "the provider refused the refresh token (invalid_grant: revoked, expired or already used)")
			}
			return "", m.tokenError(err, c, fmt.Sprintf("refreshing the token of connection %q", connection), "the stored tokens were kept; the next call tries again", sec)
		}
	default:
		return "", errs.E(errs.Invalid, "connector %q declares an unknown grant %q", connector, c.Grant)
	}
	return m.store1(ctx, connector, connection, rec, found, c, tok)
}

// store1 saves a renewed token unless the stored generation moved on since
// it was read (then the stored, newer token wins and ours is discarded).
func (m *Manager) store1(ctx context.Context, connector, connection string, read record, found bool, c Client, tok *oauth2.Token) (string, error) {
	var access string
	now := m.now().UTC()
	err := m.store.Update(ctx, func(tx store.Tx) error {
		cur, ok, err := getRecord(tx, connector, connection)
		if err != nil {
			return err
		}
		if ok != found || ok && cur.Generation != read.Generation {
			// Someone stored a newer token meanwhile: use theirs.
			if err := unusable(cur); err != nil {
				return err
			}
			s, err := m.getSecret(tx, connector, connection)
			if err != nil {
				return err
			}
			if s.AccessToken == "" {
				return errs.E(errs.Conflict, "connection %q of connector %q changed while its token was renewed; retry", connection, connector)
			}
			m.log.WarnContext(ctx, "oauth token renewed concurrently elsewhere; keeping the stored one",
				"connector", connector, "connection", connection)
			access = s.AccessToken
			key, gen := tokenKey(connector, connection), cur.Generation
			tx.OnCommit(func() { m.remember(key, cached{access: access, generation: gen}) })
			return nil
		}
		if !ok {
			cur = record{Connector: connector, Connection: connection, Grant: c.Grant, CreatedAt: now}
		}
		prevScopes := cur.Scopes
		m.applyToken(&cur, tok, c, prevScopes, now)
		// The rotated refresh token is committed here, before the new
		// access token is returned to anyone.
		if err := m.putSecret(tx, connector, connection, secret{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken}); err != nil {
			return err
		}
		if err := store.PutJSON(tx, TokensBucket, tokenKey(connector, connection), cur); err != nil {
			return err
		}
		access = tok.AccessToken
		key, gen := tokenKey(connector, connection), cur.Generation
		tx.OnCommit(func() { m.remember(key, cached{access: access, generation: gen}) })
		return nil
	})
	if err != nil {
		return "", err
	}
	m.log.InfoContext(ctx, "oauth token renewed", "connector", connector, "connection", connection, "grant", c.Grant)
	return access, nil
}

// reauth marks the connection reauth_required (unless its tokens changed
// since they were read, in which case the newer token is returned), drops
// its tokens and records connection.reauth_required, in one transaction.
func (m *Manager) reauth(ctx context.Context, read record, reason, why string) (string, error) {
	connector, connection := read.Connector, read.Connection
	var access string
	now := m.now().UTC()
	err := m.store.Update(ctx, func(tx store.Tx) error {
		cur, ok, err := getRecord(tx, connector, connection)
		if err != nil {
			return err
		}
		if ok && cur.Generation != read.Generation {
			if err := unusable(cur); err != nil {
				return err
			}
			s, err := m.getSecret(tx, connector, connection)
			access = s.AccessToken
			return err
		}
		if !ok {
			return errs.E(errs.NotFound, "connection %q of connector %q was deleted", connection, connector)
		}
		cur.Status = StatusReauthRequired
		cur.Reason = reason
		cur.Generation++
		cur.UpdatedAt = now
		cur.ExpiresAt = nil
		if err := store.PutJSON(tx, TokensBucket, tokenKey(connector, connection), cur); err != nil {
			return err
		}
		if err := m.vault.Delete(tx, SecretRef(connector, connection)); err != nil {
			return err
		}
		var data any = EventData{Connector: connector, Connection: connection, Status: *cur.status()}
		if m.hooks.EventData != nil {
			if data, err = m.hooks.EventData(tx, connector, connection); err != nil {
				return err
			}
		}
		if err := m.events.Record(tx, events.ConnectionReauthRequired, data); err != nil {
			return err
		}
		key := tokenKey(connector, connection)
		tx.OnCommit(func() { m.drop(key) })
		return nil
	})
	if err != nil {
		return "", err
	}
	if access != "" {
		return access, nil
	}
	m.log.WarnContext(ctx, "oauth connection needs re-authorization", "connector", connector, "connection", connection, "reason", reason)
	return "", reauthError(connector, connection, reason, why)
}

// unusable says why a connection's tokens cannot be used, or nil.
func unusable(rec record) error {
	switch rec.Status {
	case StatusReauthRequired:
		return reauthError(rec.Connector, rec.Connection, rec.Reason, "")
	case StatusPending:
		if rec.Grant == GrantAuthorizationCode && rec.Generation == 0 {
			return errs.E(errs.Conflict, "connection %q of connector %q is pending: its authorization has not completed; finish it or start again with GET /v1/connectors/%s/connect?connection=%s",
				rec.Connection, rec.Connector, rec.Connector, rec.Connection).
				WithDetails(map[string]any{"connector": rec.Connector, "connection": rec.Connection, "status": StatusPending})
		}
	}
	return nil
}

func reauthError(connector, connection, reason, why string) error {
	if why == "" {
		why = "the provider refused its refresh token"
		if reason != "" {
			why += " (" + reason + ")"
		}
	}
	return errs.E(errs.Conflict, "connection %q of connector %q needs to be authorized again: %s. Reconnect it with GET /v1/connectors/%s/connect?connection=%s",
		connection, connector, why, connector, connection).
		WithDetails(map[string]any{"connector": connector, "connection": connection, "status": StatusReauthRequired, "reason": reason,
			"reconnect": fmt.Sprintf("/v1/connectors/%s/connect?connection=%s", connector, connection)})
}

// fresh reports whether a token expiring at exp is still good for Skew.
func (m *Manager) fresh(exp *time.Time, now time.Time) bool {
	return exp == nil || now.Add(m.skew).Before(*exp)
}

// clientCtx makes x/oauth2 use the Manager's HTTP client.
func (m *Manager) clientCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, m.http)
}

// tokenError turns a failed token request into a caller-safe error: the
// provider's error code and description, the transport failure or the
// egress refusal, with every secret involved redacted.
func (m *Manager) tokenError(err error, c Client, what, advice string, sec secret, more ...string) error {
	red := redactor(append([]string{c.ClientSecret, sec.AccessToken, sec.RefreshToken}, more...)...)
	host := c.TokenURL
	if u, perr := url.Parse(c.TokenURL); perr == nil {
		host = u.Host
	}
	details := map[string]any{"connector": c.Connector}
	var (
		re *oauth2.RetrieveError
		ee *errs.Error
		ne net.Error
	)
	switch {
	case errors.As(err, &ee):
		return &errs.Error{Kind: ee.Kind, Message: fmt.Sprintf("%s: %s", what, red(ee.Message)), Details: ee.Details}
	case errors.As(err, &re):
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		details["status"] = status
		msg := fmt.Sprintf("%s: the token endpoint %s answered %d", what, host, status)
		if re.ErrorCode != "" {
			details["oauthError"] = clip(re.ErrorCode, 64)
			msg += " " + red(clip(re.ErrorCode, 64))
			if re.ErrorDescription != "" {
				msg += ": " + red(clip(re.ErrorDescription, 300))
			}
		} else if status >= 300 && status < 400 {
			msg += " (a redirect; token endpoints are not followed across redirects)"
		}
		return errs.E(errs.Upstream, "%s; %s", msg, advice).WithDetails(details)
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return errs.E(errs.UpstreamTimeout, "%s: the token endpoint %s did not answer in time; %s", what, host, advice).WithDetails(details)
	}
	return &errs.Error{Kind: errs.Upstream, Message: fmt.Sprintf("%s: the token endpoint %s failed; %s", what, host, advice),
		Details: details, Err: errors.New(red(err.Error()))}
}

// redactor replaces every non-empty secret in a string.
func redactor(secrets ...string) func(string) string {
	var pairs []string
	for _, s := range secrets {
		if len(s) >= 4 {
			pairs = append(pairs, s, "[redacted]")
		}
	}
	r := strings.NewReplacer(pairs...)
	return r.Replace
}
