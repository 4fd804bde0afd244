// Package oauthtest runs a real OAuth 2.0 authorization server in process
// for tests, built on github.com/go-oauth2/oauth2/v4 (not a hand-written
// token handler): an authorization endpoint that approves a test user at
// once (or denies consent), a token endpoint with PKCE enforced, refresh
// token rotation and the client-credentials grant, and a protected API
// that accepts only the access tokens it issued.
//
//	as := oauthtest.New(t, oauthtest.Options{})
//	as.AuthorizeURL(), as.TokenURL(), as.APIURL()
//	as.TokenRequests("refresh_token") // how many refreshes it served
//	as.Secrets()                      // every token it issued, and the client secret
package oauthtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-oauth2/oauth2/v4"
	oerrors "github.com/go-oauth2/oauth2/v4/errors"
	"github.com/go-oauth2/oauth2/v4/manage"
	"github.com/go-oauth2/oauth2/v4/models"
	oserver "github.com/go-oauth2/oauth2/v4/server"
	ostore "github.com/go-oauth2/oauth2/v4/store"
)

// User is the resource owner the authorization endpoint approves.
const User = "test-user"

// Options shape the authorization server.
type Options struct {
	// ClientID of the one registered client ("switchboard-test" when empty).
	ClientID string
	// ClientAuth is how the client must authenticate at the token
	// endpoint: "basic", "body", or "" for either.
	ClientAuth string
	// CodeTokenTTL is the lifetime of access tokens issued for an
	// authorization code (1h when 0).
	CodeTokenTTL time.Duration
	// RefreshTokenTTL is the lifetime of access tokens issued by a
	// refresh (1h when 0).
	RefreshTokenTTL time.Duration
	// ClientTokenTTL is the lifetime of client-credentials tokens (1h when 0).
	ClientTokenTTL time.Duration
	// TokenDelay delays every token response (to widen races in tests).
	TokenDelay time.Duration
	// BeforeToken, when set, runs at the start of every token request
	// with its grant type (a test can hold requests there).
	BeforeToken func(grant string)
}

// Server is a running authorization server with a protected API.
type Server struct {
	// HTTP is the httptest server.
	HTTP *httptest.Server
	// ClientID and ClientSecret are the registered client's credentials.
	ClientID, ClientSecret string

	t       testing.TB
	opts    Options
	manager *manage.Manager
	srv     *oserver.Server
	deny    atomic.Bool

	mu       sync.Mutex
	counts   map[string]int // token requests by grant_type
	api      int            // API calls answered 200
	apiDeny  int            // API calls answered 401
	issued   []string       // every access and refresh token issued
	codes    []string       // every authorization code issued
	params   []map[string][]string
	lastForm map[string][]string
}

// New starts an authorization server for the duration of t. Every redirect
// URI on 127.0.0.1 is accepted for the client.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if o.ClientID == "" {
		o.ClientID = "switchboard-test"
	}
	ttl := func(d time.Duration) time.Duration {
		if d == 0 {
			return time.Hour
		}
		return d
	}
	secret := make([]byte, 24)
	_, _ = rand.Read(secret)
	s := &Server{ClientID: o.ClientID, ClientSecret: "cs_" + hex.EncodeToString(secret), t: t, opts: o, counts: map[string]int{}}

	m := manage.NewDefaultManager()
	m.SetAuthorizeCodeTokenCfg(&manage.Config{AccessTokenExp: ttl(o.CodeTokenTTL), RefreshTokenExp: 24 * time.Hour, IsGenerateRefresh: true})
	m.SetClientTokenCfg(&manage.Config{AccessTokenExp: ttl(o.ClientTokenTTL)})
	// Rotation: every refresh issues a new refresh token and removes the
	// old access and refresh tokens.
	m.SetRefreshTokenCfg(&manage.RefreshingConfig{AccessTokenExp: ttl(o.RefreshTokenTTL), RefreshTokenExp: 24 * time.Hour,
		IsGenerateRefresh: true, IsRemoveAccess: true, IsRemoveRefreshing: true, IsResetRefreshTime: true})
	m.MustTokenStorage(ostore.NewMemoryTokenStore())
	clients := ostore.NewClientStore()
	if err := clients.Set(o.ClientID, &models.Client{ID: o.ClientID, Secret: s.ClientSecret, Domain: "http://127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	m.MapClientStorage(clients)
	// Any redirect URI on the loopback host (any port) is the client's.
	m.SetValidateURIHandler(func(_, redirect string) error {
		u, err := url.Parse(redirect)
		if err != nil || u.Hostname() != "127.0.0.1" {
			return oerrors.ErrInvalidRedirectURI
		}
		return nil
	})
	s.manager = m

	cfg := oserver.NewConfig()
	cfg.ForcePKCE = true
	cfg.AllowedCodeChallengeMethods = []oauth2.CodeChallengeMethod{oauth2.CodeChallengeS256}
	cfg.AllowedResponseTypes = []oauth2.ResponseType{oauth2.Code}
	cfg.AllowedGrantTypes = []oauth2.GrantType{oauth2.AuthorizationCode, oauth2.ClientCredentials, oauth2.Refreshing}
	srv := oserver.NewServer(cfg, m)
	srv.SetClientInfoHandler(s.clientInfo)
	srv.SetUserAuthorizationHandler(func(w http.ResponseWriter, r *http.Request) (string, error) {
		if s.deny.Load() {
			return "", oerrors.ErrAccessDenied
		}
		return User, nil
	})
	srv.SetInternalErrorHandler(func(err error) *oerrors.Response {
		t.Logf("oauthtest: internal error: %v", err)
		return nil
	})
	s.srv = srv

	mux := http.NewServeMux()
	mux.HandleFunc("/authorize", s.authorize)
	mux.HandleFunc("/token", s.token)
	mux.HandleFunc("/api/me", s.me)
	s.HTTP = httptest.NewServer(mux)
	t.Cleanup(s.HTTP.Close)
	return s
}

// AuthorizeURL is the authorization endpoint.
func (s *Server) AuthorizeURL() string { return s.HTTP.URL + "/authorize" }

// TokenURL is the token endpoint.
func (s *Server) TokenURL() string { return s.HTTP.URL + "/token" }

// APIURL is the base URL of the protected API (GET /api/me).
func (s *Server) APIURL() string { return s.HTTP.URL + "/api" }

// Deny makes the authorization endpoint deny consent (access_denied).
func (s *Server) Deny(deny bool) { s.deny.Store(deny) }

// TokenRequests returns how many token requests of a grant type
// ("authorization_code", "refresh_token", "client_credentials") arrived.
func (s *Server) TokenRequests(grant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[grant]
}

// APICalls returns how many API calls were accepted and refused (401).
func (s *Server) APICalls() (ok, unauthorized int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api, s.apiDeny
}

// AuthorizeParams returns the query of every authorization request.
func (s *Server) AuthorizeParams() []map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string][]string(nil), s.params...)
}

// LastTokenForm returns the form of the last token request (the client
// secret, code, verifier and refresh token blanked).
func (s *Server) LastTokenForm() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastForm
}

// Secrets returns the client secret and every access token, refresh token
// and authorization code issued so far: none may ever leak.
func (s *Server) Secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string{s.ClientSecret}, s.issued...)
	return append(out, s.codes...)
}

// RevokeRefresh removes a refresh token, as a user revoking the app's
// access at the provider would (the access token issued with it stays
// valid until RevokeAccess or its expiry).
func (s *Server) RevokeRefresh(refresh string) {
	s.t.Helper()
	if err := s.manager.RemoveRefreshToken(context.Background(), refresh); err != nil {
		s.t.Fatal(err)
	}
}

// RevokeAccess removes an access token.
func (s *Server) RevokeAccess(access string) {
	s.t.Helper()
	if err := s.manager.RemoveAccessToken(context.Background(), access); err != nil {
		s.t.Fatal(err)
	}
}

// clientInfo reads the client's credentials as Options.ClientAuth requires.
func (s *Server) clientInfo(r *http.Request) (string, string, error) {
	switch s.opts.ClientAuth {
	case "basic":
		return oserver.ClientBasicHandler(r)
	case "body":
		if _, _, ok := r.BasicAuth(); ok {
			return "", "", oerrors.ErrInvalidClient
		}
		return oserver.ClientFormHandler(r)
	}
	if id, secret, err := oserver.ClientBasicHandler(r); err == nil {
		return id, secret, nil
	}
	return oserver.ClientFormHandler(r)
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.params = append(s.params, r.URL.Query())
	s.mu.Unlock()
	rec := httptest.NewRecorder()
	if err := s.srv.HandleAuthorizeRequest(rec, r); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if loc := rec.Header().Get("Location"); loc != "" {
		if u, err := r.URL.Parse(loc); err == nil {
			if c := u.Query().Get("code"); c != "" {
				s.mu.Lock()
				s.codes = append(s.codes, c)
				s.mu.Unlock()
			}
		}
	}
	copyResponse(w, rec)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	form := map[string][]string{}
	for k, v := range r.PostForm {
		switch k {
		case "client_secret", "code", "code_verifier", "refresh_token":
			form[k] = []string{"(set)"}
		default:
			form[k] = v
		}
	}
	if _, _, ok := r.BasicAuth(); ok {
		form["(basic)"] = []string{"(set)"}
	}
	s.mu.Lock()
	s.counts[r.PostForm.Get("grant_type")]++
	s.lastForm = form
	s.mu.Unlock()
	if s.opts.BeforeToken != nil {
		s.opts.BeforeToken(r.PostForm.Get("grant_type"))
	}
	if s.opts.TokenDelay > 0 {
		time.Sleep(s.opts.TokenDelay)
	}
	rec := httptest.NewRecorder()
	_ = s.srv.HandleTokenRequest(rec, r)
	var body struct {
		Access  string `json:"access_token"`
		Refresh string `json:"refresh_token"`
	}
	if json.Unmarshal(rec.Body.Bytes(), &body) == nil {
		s.mu.Lock()
		for _, v := range []string{body.Access, body.Refresh} {
			if v != "" {
				s.issued = append(s.issued, v)
			}
		}
		s.mu.Unlock()
	}
	copyResponse(w, rec)
}

// me is the protected API: it answers who the token belongs to.
func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	ti, err := s.srv.ValidationBearerToken(r)
	if err != nil {
		s.mu.Lock()
		s.apiDeny++
		s.mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	s.api++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"user": ti.GetUserID(), "client": ti.GetClientID(), "scope": ti.GetScope()})
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// IsRefresh reports whether s is a refresh token this server issued and
// still honours.
func (s *Server) IsRefresh(token string) bool {
	_, err := s.manager.LoadRefreshToken(context.Background(), token)
	return err == nil
}
