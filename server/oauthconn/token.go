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
	// Hot path: a fresh token this process holds. Changes made here
	// (callback, refresh, reauth, deletion) replace or drop it at once; a
	// change made by another process shows when the upstream refuses the
	// token (401), through Refresh.
	if c, ok := m.recall(key); ok && m.fresh(c.rec, now) {
		return c.access, nil
	}
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
		if !m.fresh(rec, now) {
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
		m.remember(key, cacheOf(rec, s.AccessToken))
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
			// The flight outlives any one caller's cancellation (others
			// share it); it is bounded by the HTTP client's timeout and,
			// while waiting for another process, by that process's lease.
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

// A Manager waiting for another process's token request looks at the
// store again as soon as the tokens bucket changes (the other process
// stored its token or gave its lease up; Store.Changes sees the commits of
// every replica), checking every leaseWatch, and at least every leasePoll
// (for a lease that expired with its process).
const (
	leaseWatch = 2 * time.Millisecond
	leasePoll  = 250 * time.Millisecond
)

// waitForLease waits until the tokens bucket changed since since, or
// leasePoll passed, or ctx ended.
func (m *Manager) waitForLease(ctx context.Context, since uint64) error {
	deadline := time.NewTimer(leasePoll)
	defer deadline.Stop()
	tick := time.NewTicker(leaseWatch)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return nil
		case <-tick.C:
			if m.store.Changes(TokensBucket) != since {
				return nil
			}
		}
	}
}

// state is what renewNow reads.
type state struct {
	rec   record
	found bool
	sec   secret
	c     Client
}

// renewNow re-reads the stored token (another caller or process may have
// renewed it meanwhile) and returns it when it is usable. Otherwise it
// takes the connection's lease in the store (waiting while another process
// holds it), requests a new token and stores it if the stored generation
// did not change in between.
func (m *Manager) renewNow(ctx context.Context, connector, connection, stale string) (string, error) {
	for {
		var st state
		changes := m.store.Changes(TokensBucket)
		err := m.store.View(ctx, func(tx store.Tx) error {
			var err error
			if st.rec, st.found, err = getRecord(tx, connector, connection); err != nil {
				return err
			}
			if st.found {
				if st.sec, err = m.getSecret(tx, connector, connection); err != nil {
					return err
				}
			}
			st.c, err = m.lookup(tx, connector)
			return err
		})
		if err != nil {
			return "", err
		}
		if st.found {
			if err := unusable(st.rec); err != nil {
				return "", err
			}
			if a := st.sec.AccessToken; a != "" && (stale == "" && m.fresh(st.rec, m.now()) || stale != "" && a != stale) {
				m.remember(tokenKey(connector, connection), cacheOf(st.rec, a))
				return a, nil
			}
			got, err := m.acquire(ctx, st.rec)
			if err != nil {
				return "", err
			}
			if !got {
				if err := m.waitForLease(ctx, changes); err != nil {
					return "", err
				}
				continue
			}
		}
		return m.request(ctx, connector, connection, st)
	}
}

// acquire takes the lease of a connection whose tokens are still of the
// generation read; false when they changed or another process holds it.
func (m *Manager) acquire(ctx context.Context, read record) (bool, error) {
	got := false
	err := m.store.Update(ctx, func(tx store.Tx) error {
		got = false // a run that failed after taking it may have set it
		cur, ok, err := getRecord(tx, read.Connector, read.Connection)
		if err != nil {
			return err
		}
		if !ok {
			return errs.E(errs.NotFound, "connection %q of connector %q was deleted", read.Connection, read.Connector)
		}
		now := m.now().UTC()
		if cur.Generation != read.Generation ||
			cur.LeaseOwner != "" && cur.LeaseOwner != m.id && cur.LeaseUntil != nil && now.Before(*cur.LeaseUntil) {
			return nil
		}
		until := now.Add(m.http.Timeout + 5*time.Second)
		cur.LeaseOwner, cur.LeaseUntil = m.id, &until
		got = true
		return store.PutJSON(tx, TokensBucket, tokenKey(read.Connector, read.Connection), cur)
	})
	return got, err
}

// release gives the lease up after a failed token request.
func (m *Manager) release(ctx context.Context, read record) {
	err := m.store.Update(ctx, func(tx store.Tx) error {
		cur, ok, err := getRecord(tx, read.Connector, read.Connection)
		if err != nil || !ok || cur.LeaseOwner != m.id || cur.Generation != read.Generation {
			return err
		}
		cur.LeaseOwner, cur.LeaseUntil = "", nil
		return store.PutJSON(tx, TokensBucket, tokenKey(read.Connector, read.Connection), cur)
	})
	if err != nil {
		m.log.WarnContext(ctx, "oauth lease release failed", "connector", read.Connector, "connection", read.Connection, "error", err.Error())
	}
}

// request asks the token endpoint for a new token and stores it.
func (m *Manager) request(ctx context.Context, connector, connection string, st state) (string, error) {
	c, rec, sec := st.c, st.rec, st.sec
	var (
		tok *oauth2.Token
		err error
	)
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
			if st.found {
				m.release(ctx, rec)
			}
			return "", m.tokenError(err, c, fmt.Sprintf("fetching a client-credentials token for connection %q", connection), "check the connector's tokenUrl, clientId and client secret", sec)
		}
	case GrantAuthorizationCode:
		if !st.found {
			return "", errs.E(errs.NotFound, "connection %q of connector %q not found; connect it with GET /v1/connectors/%s/connect?connection=%s",
				connection, connector, connector, connection).WithDetails(map[string]any{"connector": connector, "connection": connection})
		}
		if sec.AccessToken == "" && sec.RefreshToken == "" {
			m.release(ctx, rec)
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
			m.release(ctx, rec)
			return "", m.tokenError(err, c, fmt.Sprintf("refreshing the token of connection %q", connection), "the stored tokens were kept; the next call tries again", sec)
		}
	default:
		return "", errs.E(errs.Invalid, "connector %q declares an unknown grant %q", connector, c.Grant)
	}
	return m.store1(ctx, connector, connection, rec, st.found, c, tok)
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
			key, c := tokenKey(connector, connection), cacheOf(cur, access)
			tx.OnCommit(func() { m.remember(key, c) })
			return nil
		}
		if !ok {
			cur = record{Connector: connector, Connection: connection, Grant: c.Grant, CreatedAt: now}
			if m.hooks.Status != nil {
				if err := m.hooks.Status(tx, connector, connection, StatusActive); err != nil {
					return err
				}
			}
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
		key, c := tokenKey(connector, connection), cacheOf(cur, access)
		tx.OnCommit(func() { m.remember(key, c) })
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
		cur.LeaseOwner, cur.LeaseUntil = "", nil
		cur.Generation++
		cur.UpdatedAt = now
		cur.ExpiresAt = nil
		if err := store.PutJSON(tx, TokensBucket, tokenKey(connector, connection), cur); err != nil {
			return err
		}
		if err := m.vault.Delete(tx, SecretRef(connector, connection)); err != nil {
			return err
		}
		if m.hooks.Status != nil {
			if err := m.hooks.Status(tx, connector, connection, StatusReauthRequired); err != nil {
				return err
			}
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
	if why == "" && reason == ReasonConnectorChanged {
		why = "the connector's baseUrl, auth type or tokenUrl changed, so the tokens obtained for the old target were dropped"
	}
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

// fresh reports whether a token is still good: it expires later than
// Skew from now (or never). For tokens that live less than twice the skew,
// half their lifetime stands in for the skew, so that short-lived tokens
// are not refreshed on every call.
func (m *Manager) fresh(rec record, now time.Time) bool {
	if rec.ExpiresAt == nil {
		return true
	}
	margin := m.skew
	if rec.LastRefreshedAt != nil {
		if half := rec.ExpiresAt.Sub(*rec.LastRefreshedAt) / 2; half < margin {
			margin = half
		}
	}
	return now.Add(margin).Before(*rec.ExpiresAt)
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
