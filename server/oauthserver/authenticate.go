package oauthserver

import (
	"context"
	"crypto/ed25519"
	"errors"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// maxTokenBytes bounds a bearer JWT; longer credentials are refused unparsed.
const maxTokenBytes = 8 << 10

// Authenticate implements auth.Authenticator for JWT access tokens: those
// this service issued and those of configured external issuers. It checks
// the signature against the issuer's keys, exp (required), nbf and iat with
// the configured leeway, iss, aud and, for local tokens, that the client
// still exists; the scopes become the principal's (the route's required
// scopes are checked by the caller). A token verified once is cached until
// it expires, so that repeated requests with it cost a map lookup.
func (s *Service) Authenticate(ctx context.Context, credential string) (*auth.Principal, error) {
	if !looksLikeJWT(credential) {
		return nil, auth.ErrNotMine
	}
	now := s.now()
	if e, ok := s.cache.get(credential); ok {
		if now.UnixNano() < e.exp {
			if e.clientID == "" {
				return e.principal(), nil
			}
			c, live, err := s.clients.lookup(ctx, s.store, e.clientID)
			if err != nil {
				return nil, err
			}
			if live {
				// The client's name and policy change in place: take them
				// from the client, not from when the token was verified.
				p := e.principal()
				p.Name, p.Policy = c.Name, c.Policy
				return p, nil
			}
		}
		s.cache.drop(credential)
	}
	if len(credential) > maxTokenBytes {
		return nil, unauthenticated("access token is longer than %d bytes", maxTokenBytes)
	}
	tok, err := jwt.ParseSigned(credential, allowedAlgorithms)
	if err != nil {
		return nil, unauthenticated("access token is not a well-formed signed JWT with an accepted algorithm (%s)", algorithmNames)
	}
	var peek jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&peek); err != nil {
		return nil, unauthenticated("access token claims are not valid JSON")
	}
	var e cacheEntry
	switch x := s.external[peek.Issuer]; {
	case peek.Issuer == s.issuer:
		e, err = s.verifyLocal(ctx, tok, now)
	case x != nil:
		e, err = x.verify(ctx, tok, now, s.leeway)
	default:
		return nil, unauthenticated("access token issuer %s is not trusted", quoteShort(peek.Issuer))
	}
	if err != nil {
		return nil, err
	}
	s.cache.put(credential, e, now)
	return e.principal(), nil
}

// allowedAlgorithms are the JWS algorithms accepted at all; local tokens
// must use EdDSA. Symmetric algorithms are never accepted.
var allowedAlgorithms = []jose.SignatureAlgorithm{
	jose.EdDSA, jose.ES256, jose.ES384, jose.ES512,
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
}

var algorithmNames = func() string {
	names := make([]string, len(allowedAlgorithms))
	for i, a := range allowedAlgorithms {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}()

// looksLikeJWT reports whether c has the shape of a compact JWS.
func looksLikeJWT(c string) bool {
	return strings.HasPrefix(c, "eyJ") && strings.Count(c, ".") == 2
}

func (s *Service) verifyLocal(ctx context.Context, tok *jwt.JSONWebToken, now time.Time) (cacheEntry, error) {
	h := tok.Headers[0]
	if h.Algorithm != string(Algorithm) {
		return cacheEntry{}, unauthenticated("access token algorithm %s is not the issuer's (%s)", quoteShort(h.Algorithm), Algorithm)
	}
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(typ, "at+jwt") && !strings.EqualFold(typ, "application/at+jwt") {
		return cacheEntry{}, unauthenticated("token is not an access token (typ must be at+jwt)")
	}
	key, ok := s.verificationKey(ctx, h.KeyID)
	if !ok {
		return cacheEntry{}, unauthenticated("access token is signed with an unknown or retired key")
	}
	var c accessClaims
	if err := tok.Claims(ed25519.PublicKey(key.PublicKey), &c); err != nil {
		return cacheEntry{}, unauthenticated("access token signature is invalid")
	}
	if err := validateClaims(c.Claims, s.issuer, s.audience, now, s.leeway); err != nil {
		return cacheEntry{}, err
	}
	if c.IssuedAt == nil {
		return cacheEntry{}, unauthenticated("access token has no iat claim")
	}
	if key.RetiredAt != nil && c.IssuedAt.Time().After(key.RetiredAt.Add(s.leeway)) {
		return cacheEntry{}, unauthenticated("access token was issued after its signing key was retired")
	}
	id := c.ClientID
	if id == "" {
		id = c.Subject
	}
	client, found, err := s.clients.lookup(ctx, s.store, id)
	if err != nil {
		return cacheEntry{}, err
	}
	if !found {
		return cacheEntry{}, unauthenticated("the OAuth client of this access token no longer exists")
	}
	var scopes []string
	for _, sc := range strings.Fields(c.Scope) {
		if slices.Contains(client.Scopes, sc) && !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	return cacheEntry{
		p:        auth.Principal{ID: client.ID, Kind: auth.KindOAuthToken, Name: client.Name, Scopes: scopes, CreatedAt: client.CreatedAt, Policy: client.Policy},
		exp:      c.Expiry.Time().Add(s.leeway).UnixNano(),
		clientID: client.ID,
	}, nil
}

// validateClaims checks iss, aud, exp (required), nbf and iat.
func validateClaims(c jwt.Claims, iss, aud string, now time.Time, leeway time.Duration) error {
	if c.Expiry == nil {
		return unauthenticated("access token has no exp claim")
	}
	err := c.ValidateWithLeeway(jwt.Expected{Issuer: iss, AnyAudience: jwt.Audience{aud}, Time: now}, leeway)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jwt.ErrExpired):
		return unauthenticated("access token expired at %s", c.Expiry.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrNotValidYet):
		return unauthenticated("access token is not valid before %s", c.NotBefore.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return unauthenticated("access token is issued in the future (iat %s)", c.IssuedAt.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrInvalidAudience):
		return unauthenticated("access token audience does not include %s", quoteShort(aud))
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return unauthenticated("access token issuer is not %s", quoteShort(iss))
	}
	return unauthenticated("access token claims are invalid")
}

func unauthenticated(format string, args ...any) *errs.Error {
	return errs.E(errs.Unauthenticated, format, args...)
}

// cacheEntry is a verified token's principal.
type cacheEntry struct {
	p        auth.Principal
	exp      int64  // Unix ns after which the entry is void (exp + leeway)
	clientID string // local tokens: the client, checked on every use
}

// principal returns a copy the caller may keep.
func (e *cacheEntry) principal() *auth.Principal {
	p := e.p
	return &p
}

const (
	defaultCacheSize = 1 << 16
	cacheShards      = 32
)

// tokenCache maps a verified token to its principal, sharded, bounded.
type tokenCache struct {
	seed   maphash.Seed
	max    int
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string]cacheEntry
}

func (c *tokenCache) init(size int) {
	c.seed = maphash.MakeSeed()
	c.max = max(1, size/cacheShards)
	for i := range c.shards {
		c.shards[i].m = map[string]cacheEntry{}
	}
}

func (c *tokenCache) shard(tok string) *cacheShard {
	return &c.shards[maphash.String(c.seed, tok)%cacheShards]
}

func (c *tokenCache) get(tok string) (cacheEntry, bool) {
	s := c.shard(tok)
	s.mu.RLock()
	e, ok := s.m[tok]
	s.mu.RUnlock()
	return e, ok
}

// put stores e; a full shard first loses its expired entries, then, if
// still full, arbitrary ones (they are only re-verified).
func (c *tokenCache) put(tok string, e cacheEntry, now time.Time) {
	s := c.shard(tok)
	s.mu.Lock()
	if len(s.m) >= c.max {
		n := now.UnixNano()
		for k, v := range s.m {
			if v.exp <= n {
				delete(s.m, k)
			}
		}
		for k := range s.m {
			if len(s.m) < c.max*3/4 {
				break
			}
			delete(s.m, k)
		}
	}
	s.m[tok] = e
	s.mu.Unlock()
}

func (c *tokenCache) drop(tok string) {
	s := c.shard(tok)
	s.mu.Lock()
	delete(s.m, tok)
	s.mu.Unlock()
}

// dropClient forgets every token of a deleted client.
func (c *tokenCache) dropClient(id string) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, v := range s.m {
			if v.clientID == id {
				delete(s.m, k)
			}
		}
		s.mu.Unlock()
	}
}
