package web

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ids"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// Cookie and form names.
const (
	// ConsoleCookie holds a console session's id.
	ConsoleCookie = "sb_console"
	// CSRFHeader carries the console session's CSRF token on the API
	// calls the console makes.
	CSRFHeader = "X-CSRF-Token"
	// csrfField is the forms' CSRF field.
	csrfField = "csrf"
)

// csrfCookie is a double-submit CSRF token for the forms of an area: a
// random value in an HttpOnly cookie scoped to the area's path, which each
// form echoes in its csrf field. A cross-site page can neither read the
// cookie nor set it, so it cannot forge the pair.
type csrfCookie struct {
	name     string
	path     string
	sameSite http.SameSite
}

var (
	// The connect page's cookie is Lax: the browser comes back to the
	// page from the OAuth provider, a cross-site navigation.
	connectCSRF = csrfCookie{name: "sb_csrf_connect", path: "/connect/", sameSite: http.SameSiteLaxMode}
	consoleCSRF = csrfCookie{name: "sb_csrf_console", path: "/console", sameSite: http.SameSiteStrictMode}
)

// token returns the browser's CSRF token for the area, setting a new one
// when it has none.
func (c csrfCookie) token(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(c.name); err == nil && validToken(ck.Value) {
		return ck.Value
	}
	v := randomToken()
	http.SetCookie(w, &http.Cookie{Name: c.name, Value: v, Path: c.path, HttpOnly: true, Secure: r.TLS != nil, SameSite: c.sameSite})
	return v
}

// check refuses a form whose csrf field does not match the cookie, or
// that comes from another origin.
func (c csrfCookie) check(r *http.Request) error {
	if err := sameOrigin(r); err != nil {
		return err
	}
	ck, err := r.Cookie(c.name)
	if err != nil || !validToken(ck.Value) {
		return errs.E(errs.Forbidden, "this form has expired (no CSRF cookie): reload the page and submit it again")
	}
	if !equal(r.PostFormValue(csrfField), ck.Value) {
		return errs.E(errs.Forbidden, "this form's CSRF token does not match: reload the page and submit it again")
	}
	return nil
}

// sameOrigin refuses a request whose Origin header (sent by browsers on
// every POST) names another origin than the request's own host. A form
// posted from a page under Referrer-Policy: no-referrer (every page here)
// says "Origin: null" (the Fetch standard serializes a navigation's
// origin so under that policy); then the browser's Sec-Fetch-Site, when
// it sends one, must say same-origin.
func sameOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	if o == "null" {
		// A browser without Fetch Metadata sends neither: the CSRF token
		// alone decides then.
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
			return errs.E(errs.Forbidden, "cross-origin form posts are refused (Origin null, Sec-Fetch-Site %q, not same-origin)", site)
		}
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || !strings.EqualFold(u.Host, r.Host) {
		return errs.E(errs.Forbidden, "cross-origin form posts are refused (Origin %s is not this server)", o)
	}
	return nil
}

func equal(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func randomToken() string { return ids.Secret("") }

// validToken reports whether v looks like a randomToken.
func validToken(v string) bool {
	if len(v) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil
}

// ConsoleBucket holds console sessions by the SHA-256 of their cookie.
const ConsoleBucket = "console_sessions"

// DefaultConsoleTTL is how long a console session lasts.
const DefaultConsoleTTL = 8 * time.Hour

// consoleSession is a signed-in console, stored under the hash of its
// cookie. The API key it signed in with is sealed by the vault: every
// request authenticates with it again, so a revoked or changed key takes
// effect at once.
type consoleSession struct {
	PrincipalID string    `json:"principalId"`
	SealedKey   []byte    `json:"sealedKey"`
	CSRF        string    `json:"csrf"`
	CreatedAt   time.Time `json:"createdAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
}

// Console keeps console sessions.
type Console struct {
	Store store.Store
	Vault *vault.Vault
	// Authn checks the keys signing in.
	Authn auth.Authenticator
	// TTL is a session's lifetime (DefaultConsoleTTL when 0).
	TTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (c *Console) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

func (c *Console) ttl() time.Duration {
	if c.TTL > 0 {
		return c.TTL
	}
	return DefaultConsoleTTL
}

func sessionRef(hash string) string { return ConsoleBucket + "/" + hash }

// SignIn checks key and starts a session: it returns the cookie value
// and when the session expires. A key that does not authenticate is
// errs.Unauthenticated (never quoting it).
func (c *Console) SignIn(ctx context.Context, key string) (cookie string, expires time.Time, err error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return "", time.Time{}, errs.E(errs.Unauthenticated, "enter an API key")
	}
	p, err := c.Authn.Authenticate(ctx, key)
	if err != nil {
		return "", time.Time{}, errs.E(errs.Unauthenticated, "this API key is not valid (unknown, revoked or expired)")
	}
	cookie = randomToken()
	h := ids.Digest(cookie)
	sealed, err := c.Vault.Seal(sessionRef(h), []byte(key))
	if err != nil {
		return "", time.Time{}, err
	}
	now := c.now()
	s := consoleSession{PrincipalID: p.ID, SealedKey: sealed, CSRF: randomToken(), CreatedAt: now, ExpiresAt: now.Add(c.ttl())}
	err = c.Store.Update(ctx, func(tx store.Tx) error {
		if err := sweepConsole(tx, now); err != nil {
			return err
		}
		return store.PutJSON(tx, ConsoleBucket, h, s)
	})
	return cookie, s.ExpiresAt, err
}

// sweepConsole deletes expired sessions.
func sweepConsole(tx store.Tx, now time.Time) error {
	var expired []string
	err := tx.Scan(ConsoleBucket, "", "", func(k string, v []byte) (bool, error) {
		var s consoleSession
		if err := json.Unmarshal(v, &s); err != nil || !now.Before(s.ExpiresAt) {
			expired = append(expired, k)
		}
		return true, nil
	})
	for _, k := range expired {
		if err == nil {
			err = tx.Delete(ConsoleBucket, k)
		}
	}
	return err
}

// errNoSession is a missing, unknown or expired console session.
var errNoSession = errs.E(errs.Unauthenticated, "the console session has ended: sign in again at /console")

// Session is a signed-in console as a request sees it.
type Session struct {
	// Key is the API key it signed in with: never log or show it.
	Key string
	// CSRF is the token its writes must carry (CSRFHeader or the csrf field).
	CSRF        string
	PrincipalID string
	ExpiresAt   time.Time
}

// Resolve returns the session of a cookie value: errNoSession (an
// errs.Unauthenticated error) when it is unknown or expired.
func (c *Console) Resolve(ctx context.Context, cookie string) (Session, error) {
	if !validToken(cookie) {
		return Session{}, errNoSession
	}
	h := ids.Digest(cookie)
	var s consoleSession
	err := c.Store.View(ctx, func(tx store.Tx) error { return store.GetJSON(tx, ConsoleBucket, h, &s) })
	if errors.Is(err, errs.NotFound) || err == nil && !c.now().Before(s.ExpiresAt) {
		return Session{}, errNoSession
	}
	if err != nil {
		return Session{}, err
	}
	key, err := c.Vault.Open(sessionRef(h), s.SealedKey)
	if err != nil {
		return Session{}, errNoSession
	}
	return Session{Key: string(key), CSRF: s.CSRF, PrincipalID: s.PrincipalID, ExpiresAt: s.ExpiresAt}, nil
}

// SignOut ends the session of a cookie value (none is not an error).
func (c *Console) SignOut(ctx context.Context, cookie string) error {
	if !validToken(cookie) {
		return nil
	}
	return c.Store.Update(ctx, func(tx store.Tx) error { return tx.Delete(ConsoleBucket, ids.Digest(cookie)) })
}

// FromRequest returns the console session of r's cookie; ok is false
// without a cookie.
func (c *Console) FromRequest(r *http.Request) (s Session, ok bool, err error) {
	ck, cerr := r.Cookie(ConsoleCookie)
	if cerr != nil {
		return Session{}, false, nil
	}
	s, err = c.Resolve(r.Context(), ck.Value)
	return s, true, err
}

// CheckWrite refuses a console API write without the session's CSRF
// token in CSRFHeader, or from another origin.
func (s Session) CheckWrite(r *http.Request) error {
	if err := sameOrigin(r); err != nil {
		return err
	}
	if !equal(r.Header.Get(CSRFHeader), s.CSRF) {
		return errs.E(errs.Forbidden, "a console request without its %s header: reload the console", CSRFHeader)
	}
	return nil
}
