package oauthserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
)

// maxJWKSBytes bounds an external issuer's JWKS document.
const maxJWKSBytes = 1 << 20

// externalIssuer verifies the JWTs of one configured authorization server
// against its JWKS, fetched lazily, cached, refetched every
// RefreshInterval and, when a token names an unknown key id (the issuer
// rotated), at once, but at most every MinRefreshInterval.
type externalIssuer struct {
	cfg    config.ExternalIssuer
	client *http.Client
	now    func() time.Time

	set         atomic.Pointer[jwksSnapshot]
	fetchMu     sync.Mutex
	lastAttempt time.Time // guarded by fetchMu
}

type jwksSnapshot struct {
	keys      jose.JSONWebKeySet
	fetchedAt time.Time
}

func newExternalIssuer(cfg config.ExternalIssuer, client *http.Client, now func() time.Time) *externalIssuer {
	return &externalIssuer{cfg: cfg.WithDefaults(), client: client, now: now}
}

func (x *externalIssuer) verify(ctx context.Context, tok *jwt.JSONWebToken, now time.Time, leeway time.Duration) (cacheEntry, error) {
	h := tok.Headers[0]
	key, err := x.key(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		return cacheEntry{}, err
	}
	var (
		c   jwt.Claims
		all map[string]any
	)
	if err := tok.Claims(key, &c, &all); err != nil {
		return cacheEntry{}, unauthenticated("access token signature is invalid")
	}
	if err := validateClaims(c, x.cfg.Issuer, x.cfg.Audience, now, leeway); err != nil {
		return cacheEntry{}, err
	}
	if c.Subject == "" {
		return cacheEntry{}, unauthenticated("access token has no sub claim")
	}
	var scopes []string
	add := func(sc string) {
		if auth.ValidScope(sc) && !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	switch v := all[x.cfg.ScopesClaim].(type) {
	case string:
		for _, sc := range strings.Fields(v) {
			add(sc)
		}
	case []any:
		for _, e := range v {
			if sc, ok := e.(string); ok {
				add(sc)
			}
		}
	}
	p := auth.Principal{ID: "ext:" + x.cfg.Name + ":" + c.Subject, Kind: auth.KindOAuthToken, Name: c.Subject, Scopes: scopes}
	if rl := x.cfg.RateLimit; rl != nil {
		p.RateLimit = (&auth.RateLimit{RequestsPerMinute: rl.RequestsPerMinute, TokensPerMinute: rl.TokensPerMinute}).Normalize()
	}
	return cacheEntry{p: p, exp: c.Expiry.Time().Add(leeway).UnixNano()}, nil
}

// key finds the verification key for kid, fetching the JWKS when it is
// missing, stale or lacks kid.
func (x *externalIssuer) key(ctx context.Context, kid, alg string) (*jose.JSONWebKey, error) {
	snap := x.set.Load()
	if snap != nil && x.now().Sub(snap.fetchedAt) < x.cfg.RefreshInterval.D() {
		if k := findKey(snap.keys, kid, alg); k != nil {
			return k, nil
		}
	}
	x.fetchMu.Lock()
	defer x.fetchMu.Unlock()
	// Another request may have refreshed while this one waited.
	if s2 := x.set.Load(); s2 != snap && s2 != nil {
		if k := findKey(s2.keys, kid, alg); k != nil {
			return k, nil
		}
		snap = s2
	}
	now := x.now()
	if snap == nil || now.Sub(x.lastAttempt) >= x.cfg.MinRefreshInterval.D() {
		x.lastAttempt = now
		keys, err := x.fetch(ctx)
		if err != nil {
			if snap == nil {
				return nil, unauthenticated("cannot verify the access token: the JWKS of issuer %s is unavailable", quoteShort(x.cfg.Issuer))
			}
			// Keep using the keys we have.
		} else {
			snap = &jwksSnapshot{keys: keys, fetchedAt: now}
			x.set.Store(snap)
		}
	}
	if k := findKey(snap.keys, kid, alg); k != nil {
		return k, nil
	}
	return nil, unauthenticated("access token is signed with a key %s that issuer %s does not publish", quoteShort(kid), quoteShort(x.cfg.Issuer))
}

// fetch downloads the issuer's JWKS.
func (x *externalIssuer) fetch(ctx context.Context) (jose.JSONWebKeySet, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, x.cfg.JWKSURL, nil)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := x.client.Do(req)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return jose.JSONWebKeySet{}, fmt.Errorf("GET %s: status %d", x.cfg.JWKSURL, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	if len(b) > maxJWKSBytes {
		return jose.JSONWebKeySet{}, fmt.Errorf("GET %s: JWKS larger than %d bytes", x.cfg.JWKSURL, maxJWKSBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return jose.JSONWebKeySet{}, fmt.Errorf("GET %s: %w", x.cfg.JWKSURL, err)
	}
	return set, nil
}

// findKey returns the public signing key for kid usable with alg; a token
// without kid matches when the set has exactly one usable key.
func findKey(set jose.JSONWebKeySet, kid, alg string) *jose.JSONWebKey {
	var match []*jose.JSONWebKey
	for i := range set.Keys {
		k := &set.Keys[i]
		if !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") || (k.Algorithm != "" && k.Algorithm != alg) {
			continue
		}
		if _, symmetric := k.Key.([]byte); symmetric {
			continue
		}
		if kid == "" || k.KeyID == kid {
			match = append(match, k)
		}
	}
	if len(match) == 1 || (kid != "" && len(match) > 0) {
		return match[0]
	}
	return nil
}
