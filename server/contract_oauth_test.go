package server_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthserver"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// createOAuthClient registers a client through the API.
func createOAuthClient(t *testing.T, c *client.ClientWithResponses, name string, scopes []client.Scope, rl *client.RateLimitOverride) *client.OAuthClientCreated {
	t.Helper()
	res, err := c.CreateOAuthClientWithResponse(bg, client.OAuthClientCreate{Name: name, Scopes: scopes, RateLimit: rl})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusCreated || res.JSON201 == nil {
		t.Fatalf("create OAuth client %q = %d %s, want 201", name, res.StatusCode(), res.Body)
	}
	return res.JSON201
}

// basic is the RFC 6749 §2.3.1 Basic header for a client.
func basic(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

// issueToken obtains an access token for a client with HTTP Basic.
func issueToken(t *testing.T, env *servertest.Env, id, secret string, scope *string) *client.OAuthToken {
	t.Helper()
	auth := basic(id, secret)
	res, err := env.ClientWithKey(t, "").CreateOAuthTokenWithFormdataBodyWithResponse(bg,
		&client.CreateOAuthTokenParams{Authorization: &auth},
		client.OAuthTokenRequest{GrantType: "client_credentials", Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusOK || res.JSON200 == nil {
		t.Fatalf("token = %d %s, want 200", res.StatusCode(), res.Body)
	}
	return res.JSON200
}

// fetchJWKS reads the published key set with jwx (independent of the
// go-jose code that signs).
func fetchJWKS(t *testing.T, env *servertest.Env) jwk.Set {
	t.Helper()
	res, err := env.ClientWithKey(t, "").GetJWKSWithResponse(bg)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusOK {
		t.Fatalf("jwks = %d %s", res.StatusCode(), res.Body)
	}
	set, err := jwk.Parse(res.Body)
	if err != nil {
		t.Fatalf("jwx cannot parse the JWKS: %v\n%s", err, res.Body)
	}
	return set
}

func TestContractOAuthClientLifecycle(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)

	rpm := 30
	res, err := admin.CreateOAuthClientWithResponse(bg, client.OAuthClientCreate{
		Name: "reporting", Scopes: []client.Scope{client.ScopeLLM, client.ScopeInvoke},
		RateLimit: &client.RateLimitOverride{RequestsPerMinute: &rpm},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusCreated || res.JSON201 == nil {
		t.Fatalf("create = %d %s", res.StatusCode(), res.Body)
	}
	if got := res.HTTPResponse.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", got)
	}
	c := res.JSON201
	if !strings.HasPrefix(c.Id, "oc_") || !strings.HasPrefix(c.ClientSecret, "sbcs_") || len(c.ClientSecret) != len("sbcs_")+43 ||
		c.Name != "reporting" || c.Version != 1 || c.RateLimit == nil || c.RateLimit.RequestsPerMinute == nil || *c.RateLimit.RequestsPerMinute != 30 ||
		c.RateLimit.TokensPerMinute != nil || !slices.Equal(c.Scopes, []client.Scope{client.ScopeLLM, client.ScopeInvoke}) {
		t.Errorf("created = %+v", c)
	}

	got, err := admin.GetOAuthClientWithResponse(bg, c.Id)
	if err != nil {
		t.Fatal(err)
	}
	if got.StatusCode() != http.StatusOK || got.JSON200.Id != c.Id || !got.JSON200.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("get = %d %s", got.StatusCode(), got.Body)
	}
	assertNoSecret(t, got.Body, c.ClientSecret)

	second := createOAuthClient(t, admin, "second", []client.Scope{client.ScopeConnectorsRead}, nil)
	limit := 1
	page1, err := admin.ListOAuthClientsWithResponse(bg, &client.ListOAuthClientsParams{Limit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	if page1.StatusCode() != http.StatusOK || len(page1.JSON200.Data) != 1 || page1.JSON200.Data[0].Id != c.Id || page1.JSON200.NextCursor == nil {
		t.Fatalf("page 1 = %d %s", page1.StatusCode(), page1.Body)
	}
	page2, err := admin.ListOAuthClientsWithResponse(bg, &client.ListOAuthClientsParams{Limit: &limit, Cursor: page1.JSON200.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if page2.StatusCode() != http.StatusOK || len(page2.JSON200.Data) != 1 || page2.JSON200.Data[0].Id != second.Id || page2.JSON200.NextCursor != nil {
		t.Fatalf("page 2 = %d %s", page2.StatusCode(), page2.Body)
	}
	assertNoSecret(t, page1.Body, c.ClientSecret)
	assertNoSecret(t, page2.Body, second.ClientSecret)

	// A token of the client works until the client is deleted.
	tok := issueToken(t, env, c.Id, c.ClientSecret, nil)
	caller := env.ClientWithKey(t, tok.AccessToken)
	if r, err := caller.GetJWKSWithResponse(bg); err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("jwks with token = %v %v", r, err)
	}
	del, err := admin.DeleteOAuthClientWithResponse(bg, c.Id)
	if err != nil {
		t.Fatal(err)
	}
	if del.StatusCode() != http.StatusNoContent {
		t.Fatalf("delete = %d %s", del.StatusCode(), del.Body)
	}
	gone, err := admin.GetOAuthClientWithResponse(bg, c.Id)
	if err != nil {
		t.Fatal(err)
	}
	if gone.StatusCode() != http.StatusNotFound || gone.JSON404.Error.Code != "not_found" {
		t.Fatalf("get after delete = %d %s", gone.StatusCode(), gone.Body)
	}
	again, err := admin.DeleteOAuthClientWithResponse(bg, c.Id)
	if err != nil {
		t.Fatal(err)
	}
	if again.StatusCode() != http.StatusNotFound {
		t.Fatalf("second delete = %d %s", again.StatusCode(), again.Body)
	}
	// The deleted client's token is refused at once, and it gets no new one.
	after, err := env.ClientWithKey(t, tok.AccessToken).ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after.StatusCode() != http.StatusUnauthorized {
		t.Fatalf("token of a deleted client = %d %s, want 401", after.StatusCode(), after.Body)
	}
	a := basic(c.Id, c.ClientSecret)
	tr, err := env.ClientWithKey(t, "").CreateOAuthTokenWithFormdataBodyWithResponse(bg, &client.CreateOAuthTokenParams{Authorization: &a}, client.OAuthTokenRequest{GrantType: "client_credentials"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.StatusCode() != http.StatusUnauthorized || tr.JSON401 == nil || tr.JSON401.Error != "invalid_client" {
		t.Fatalf("token for a deleted client = %d %s, want 401 invalid_client", tr.StatusCode(), tr.Body)
	}
}

func TestContractOAuthClientValidation(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)
	zero, huge := 0, 2_000_000_000
	tests := []struct {
		name   string
		body   client.OAuthClientCreate
		fields []string
	}{
		{"empty name", client.OAuthClientCreate{Name: " ", Scopes: []client.Scope{client.ScopeLLM}}, []string{"name"}},
		{"no scopes", client.OAuthClientCreate{Name: "x", Scopes: []client.Scope{}}, []string{"scopes"}},
		{"zero rate", client.OAuthClientCreate{Name: "x", Scopes: []client.Scope{client.ScopeLLM}, RateLimit: &client.RateLimitOverride{RequestsPerMinute: &zero}}, []string{"rateLimit.requestsPerMinute"}},
		{"huge rate and bad name", client.OAuthClientCreate{Name: "a\x00b", Scopes: []client.Scope{client.ScopeLLM}, RateLimit: &client.RateLimitOverride{TokensPerMinute: &huge}}, []string{"name", "rateLimit.tokensPerMinute"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// These bodies break the spec on purpose: send them unvalidated.
			b, _ := json.Marshal(tc.body)
			c, err := client.NewClientWithResponses(env.URL, client.WithHTTPClient(env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())))
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.CreateOAuthClientWithBodyWithResponse(bg, "application/json", strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode() != http.StatusUnprocessableEntity || res.JSON422 == nil {
				t.Fatalf("= %d %s, want 422", res.StatusCode(), res.Body)
			}
			var fields []string
			for _, p := range (*res.JSON422.Error.Details)["problems"].([]any) {
				fields = append(fields, p.(map[string]any)["field"].(string))
			}
			if !slices.Equal(fields, tc.fields) {
				t.Errorf("problem fields = %v, want %v (%s)", fields, tc.fields, res.Body)
			}
		})
	}
	// Managing clients needs admin.
	llm := createKey(t, admin, "llm-only", []client.Scope{client.ScopeLLM}, nil)
	res, err := env.ClientWithKey(t, llm.Key).ListOAuthClientsWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusForbidden {
		t.Fatalf("list with an llm key = %d %s, want 403", res.StatusCode(), res.Body)
	}
}

// TestContractOAuthTokenVerifiedByJWX issues tokens both ways of client
// authentication and verifies them with jwx against the published JWKS.
func TestContractOAuthTokenVerifiedByJWX(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)
	oc := createOAuthClient(t, admin, "svc", []client.Scope{client.ScopeAdmin, client.ScopeLLM}, nil)

	// Form-body client authentication, requesting a subset of the scopes.
	res, err := env.ClientWithKey(t, "").CreateOAuthTokenWithFormdataBodyWithResponse(bg, nil, client.OAuthTokenRequest{
		GrantType: "client_credentials", ClientId: &oc.Id, ClientSecret: &oc.ClientSecret, Scope: ptr("llm"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusOK || res.JSON200 == nil {
		t.Fatalf("token = %d %s", res.StatusCode(), res.Body)
	}
	if res.HTTPResponse.Header.Get("Cache-Control") != "no-store" || res.HTTPResponse.Header.Get("Pragma") != "no-cache" {
		t.Errorf("token response headers = %v, want Cache-Control: no-store and Pragma: no-cache", res.HTTPResponse.Header)
	}
	llmTok := res.JSON200
	if llmTok.TokenType != "Bearer" || llmTok.ExpiresIn != 900 || llmTok.Scope != "llm" {
		t.Errorf("token = %+v", llmTok)
	}

	set := fetchJWKS(t, env)
	if set.Len() != 1 {
		t.Fatalf("JWKS has %d keys, want 1", set.Len())
	}
	verified, err := jwt.Parse([]byte(llmTok.AccessToken), jwt.WithKeySet(set), jwt.WithValidate(true),
		jwt.WithIssuer("switchboard"), jwt.WithAudience("switchboard"))
	if err != nil {
		t.Fatalf("jwx rejects the token: %v", err)
	}
	sub, _ := verified.Subject()
	var scope, clientID string
	if err := verified.Get("scope", &scope); err != nil {
		t.Fatal(err)
	}
	if err := verified.Get("client_id", &clientID); err != nil {
		t.Fatal(err)
	}
	exp, _ := verified.Expiration()
	iat, _ := verified.IssuedAt()
	if sub != oc.Id || clientID != oc.Id || scope != "llm" || exp.Sub(iat) != 15*time.Minute {
		t.Errorf("claims: sub %q client_id %q scope %q exp-iat %s", sub, clientID, scope, exp.Sub(iat))
	}
	msg, err := jws.Parse([]byte(llmTok.AccessToken))
	if err != nil {
		t.Fatal(err)
	}
	h := msg.Signatures()[0].ProtectedHeaders()
	typ, _ := h.Type()
	alg, _ := h.Algorithm()
	if typ != "at+jwt" || alg != jwa.EdDSA() {
		t.Errorf("header typ %q alg %v, want at+jwt EdDSA", typ, alg)
	}

	// The llm-scoped token is refused (403) on an admin route; the default
	// (all scopes) token obtained with Basic is accepted.
	r403, err := env.ClientWithKey(t, llmTok.AccessToken).ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r403.StatusCode() != http.StatusForbidden || r403.JSON403.Error.Code != "forbidden" {
		t.Fatalf("llm token on an admin route = %d %s, want 403", r403.StatusCode(), r403.Body)
	}
	all := issueToken(t, env, oc.Id, oc.ClientSecret, nil)
	if all.Scope != "admin llm" {
		t.Errorf("default scope = %q, want every scope of the client", all.Scope)
	}
	r200, err := env.ClientWithKey(t, all.AccessToken).ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r200.StatusCode() != http.StatusOK {
		t.Fatalf("admin token on an admin route = %d %s", r200.StatusCode(), r200.Body)
	}
	// Used twice: the second use is served from the verification cache.
	if r, err := env.ClientWithKey(t, all.AccessToken).ListAPIKeysWithResponse(bg, nil); err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("second use = %v %v", r, err)
	}
}

func TestContractOAuthTokenErrors(t *testing.T) {
	env := servertest.New(t)
	oc := createOAuthClient(t, env.Client(t), "svc", []client.Scope{client.ScopeLLM}, nil)
	good := basic(oc.Id, oc.ClientSecret)
	tests := []struct {
		name    string
		auth    string
		body    string
		ctype   string
		status  int
		code    string
		invalid bool // the request breaks the spec on purpose
	}{
		{"no client authentication", "", "grant_type=client_credentials", "", 401, "invalid_client", false},
		{"wrong secret", basic(oc.Id, "sbcs_wrong"), "grant_type=client_credentials", "", 401, "invalid_client", false},
		{"unknown client", basic("oc_nope", oc.ClientSecret), "grant_type=client_credentials", "", 401, "invalid_client", false},
		{"wrong secret in body", "", "grant_type=client_credentials&client_id=" + oc.Id + "&client_secret=x", "", 401, "invalid_client", false},
		{"bearer instead of basic", "Bearer " + oc.ClientSecret, "grant_type=client_credentials", "", 401, "invalid_client", false},
		{"missing grant_type", good, "scope=llm", "", 400, "invalid_request", true},
		{"password grant", good, "grant_type=password&username=a&password=b", "", 400, "unsupported_grant_type", false},
		{"scope not granted", good, "grant_type=client_credentials&scope=admin", "", 400, "invalid_scope", false},
		{"unknown scope", good, "grant_type=client_credentials&scope=everything", "", 400, "invalid_scope", false},
		{"two authentication methods", good, "grant_type=client_credentials&client_id=" + oc.Id + "&client_secret=" + oc.ClientSecret, "", 400, "invalid_request", false},
		{"repeated parameter", good, "grant_type=client_credentials&scope=llm&scope=llm", "", 400, "invalid_request", false},
		{"JSON body", good, `{"grant_type":"client_credentials"}`, "application/json", 415, "invalid_request", true},
		{"empty body", good, "", "", 400, "invalid_request", true},
	}
	hc := env.HTTPClient(t, servertest.AllowInvalidRequests())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := hc
			if !tc.invalid {
				c = env.HTTPClient(t)
			}
			req, _ := http.NewRequest(http.MethodPost, env.URL+"/v1/oauth/token", strings.NewReader(tc.body))
			ct := tc.ctype
			if ct == "" {
				ct = "application/x-www-form-urlencoded"
			}
			req.Header.Set("Content-Type", ct)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body struct {
				Error       string `json:"error"`
				Description string `json:"error_description"`
			}
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.status || body.Error != tc.code || body.Description == "" {
				t.Fatalf("= %d %+v, want %d %s", res.StatusCode, body, tc.status, tc.code)
			}
			if res.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control = %q", res.Header.Get("Cache-Control"))
			}
			if tc.status == 401 && res.Header.Get("WWW-Authenticate") != `Basic realm="switchboard"` {
				t.Errorf("WWW-Authenticate = %q", res.Header.Get("WWW-Authenticate"))
			}
			if strings.Contains(body.Description, oc.ClientSecret) {
				t.Errorf("the error echoes the client secret")
			}
		})
	}
}

// signingKey reads the server's active signing key from its store and
// vault, to forge tokens the server would otherwise accept.
func signingKey(t *testing.T, env *servertest.Env) (string, ed25519.PrivateKey) {
	t.Helper()
	res, err := env.Client(t).ListSigningKeysWithResponse(bg)
	if err != nil || res.StatusCode() != http.StatusOK || len(res.JSON200.Data) == 0 {
		t.Fatalf("list signing keys = %v %v", res, err)
	}
	kid := res.JSON200.Data[0].Kid
	var seed []byte
	if err := env.Store.View(bg, func(tx store.Tx) error {
		var err error
		seed, err = env.Vault.Get(tx, oauthserver.SigningKeyRef(kid))
		return err
	}); err != nil || len(seed) != ed25519.SeedSize {
		t.Fatalf("signing key %s from the vault: %v (%d bytes)", kid, err, len(seed))
	}
	return kid, ed25519.NewKeyFromSeed(seed)
}

// forge signs claims with jwx.
func forge(t *testing.T, alg jwa.SignatureAlgorithm, key any, kid, typ string, claims map[string]any) string {
	t.Helper()
	b := jwt.NewBuilder()
	for k, v := range claims {
		b.Claim(k, v)
	}
	tok, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	h := jws.NewHeaders()
	if kid != "" {
		_ = h.Set(jws.KeyIDKey, kid)
	}
	if typ != "" {
		_ = h.Set(jws.TypeKey, typ)
	}
	raw, err := jwt.Sign(tok, jwt.WithKey(alg, key, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestOAuthTokenRefusals forges tokens that must be refused: 401 for a bad
// token, 403 for a good token lacking the route's scope.
func TestOAuthTokenRefusals(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)
	oc := createOAuthClient(t, admin, "svc", []client.Scope{client.ScopeLLM}, nil)
	kid, key := signingKey(t, env)
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Now()
	base := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{
			"iss": "switchboard", "aud": "switchboard", "sub": oc.Id, "client_id": oc.Id, "scope": "llm",
			"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(), "jti": "t1",
		}
		if mod != nil {
			mod(c)
		}
		return c
	}
	pubAsSecret := []byte(key.Public().(ed25519.PublicKey))
	tests := []struct {
		name   string
		token  string
		status int
		msg    string
	}{
		{"control: forged with the real key", forge(t, jwa.EdDSA(), key, kid, "at+jwt", base(nil)), 403, "lacks scope admin"},
		{"expired", forge(t, jwa.EdDSA(), key, kid, "at+jwt", base(func(c map[string]any) {
			c["iat"], c["nbf"], c["exp"] = now.Add(-time.Hour).Unix(), now.Add(-time.Hour).Unix(), now.Add(-2*time.Minute).Unix()
		})), 401, "expired"},
		{"not yet valid", forge(t, jwa.EdDSA(), key, kid, "at+jwt", base(func(c map[string]any) { c["nbf"] = now.Add(10 * time.Minute).Unix() })), 401, "not valid before"},
		{"issued in the future", forge(t, jwa.EdDSA(), key, kid, "at+jwt", base(func(c map[string]any) { c["iat"] = now.Add(10 * time.Minute).Unix() })), 401, "issued in the future"},
		{"no exp", forge(t, jwa.EdDSA(), key, kid, "at+jwt", base(func(c map[string]any) { delete(c, "exp") })), 401, "no exp"},
		{"no iat", forge(t, jwa.EdDSA(), key, kid, "at+jwt", base(func(c map[string]any) { delete(c, "iat") })), 401, "no iat"},
		{"wrong audience", forge(t, jwa.EdDSA(), key, kid, "at+jwt", base(func(c map[string]any) { c["aud"] = "https://other.example" })), 401, "audience"},
		{"untrusted issuer", forge(t, jwa.EdDSA(), key, kid, "at+jwt", base(func(c map[string]any) { c["iss"] = "https://evil.example" })), 401, "not trusted"},
		{"wrongly signed", forge(t, jwa.EdDSA(), otherKey, kid, "at+jwt", base(nil)), 401, "signature is invalid"},
		{"unknown kid", forge(t, jwa.EdDSA(), key, "sk_unknown", "at+jwt", base(nil)), 401, "unknown or retired key"},
		{"not an access token", forge(t, jwa.EdDSA(), key, kid, "JWT", base(nil)), 401, "typ must be at+jwt"},
		{"HS256 with the public key as secret", forge(t, jwa.HS256(), pubAsSecret, kid, "at+jwt", base(nil)), 401, "accepted algorithm"},
		{"alg none", "eyJhbGciOiJub25lIiwidHlwIjoiYXQrand0In0." + base64.RawURLEncoding.EncodeToString(mustJSON(base(nil))) + ".", 401, "accepted algorithm"},
		{"scope the client does not hold", forge(t, jwa.EdDSA(), key, kid, "at+jwt", base(func(c map[string]any) { c["scope"] = "admin llm" })), 403, "lacks scope admin"},
		{"unknown client", forge(t, jwa.EdDSA(), key, kid, "at+jwt", base(func(c map[string]any) { c["sub"], c["client_id"] = "oc_gone", "oc_gone" })), 401, "no longer exists"},
		{"garbage", "eyJ.garbage.x", 401, "well-formed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := env.ClientWithKey(t, tc.token).ListAPIKeysWithResponse(bg, nil)
			if err != nil {
				t.Fatal(err)
			}
			var e *client.ErrorResult
			switch res.StatusCode() {
			case 401:
				e = res.JSON401
			case 403:
				e = res.JSON403
			}
			if res.StatusCode() != tc.status || e == nil || !strings.Contains(e.Error.Message, tc.msg) {
				t.Fatalf("= %d %s, want %d with %q", res.StatusCode(), res.Body, tc.status, tc.msg)
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestContractSigningKeyRotation: after a rotation new tokens carry the new
// kid, tokens of the old key stay valid, and both keys are published.
func TestContractSigningKeyRotation(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)
	oc := createOAuthClient(t, admin, "svc", []client.Scope{client.ScopeAdmin}, nil)
	old := issueToken(t, env, oc.Id, oc.ClientSecret, nil)
	oldKid, _ := signingKey(t, env)

	rot, err := admin.RotateSigningKeyWithResponse(bg)
	if err != nil {
		t.Fatal(err)
	}
	if rot.StatusCode() != http.StatusCreated || rot.JSON201.Kid == oldKid || rot.JSON201.Alg != "EdDSA" || rot.JSON201.RetiredAt != nil {
		t.Fatalf("rotate = %d %s", rot.StatusCode(), rot.Body)
	}
	list, err := admin.ListSigningKeysWithResponse(bg)
	if err != nil {
		t.Fatal(err)
	}
	if d := list.JSON200.Data; len(d) != 2 || d[0].Kid != rot.JSON201.Kid || d[1].Kid != oldKid || d[1].RetiredAt == nil {
		t.Fatalf("keys after rotation = %s", list.Body)
	}
	set := fetchJWKS(t, env)
	if _, ok := set.LookupKeyID(oldKid); !ok || set.Len() != 2 {
		t.Fatalf("JWKS after rotation lacks the old key (%d keys)", set.Len())
	}
	fresh := issueToken(t, env, oc.Id, oc.ClientSecret, nil)
	for name, tok := range map[string]string{"old": old.AccessToken, "new": fresh.AccessToken} {
		if _, err := jwt.Parse([]byte(tok), jwt.WithKeySet(set), jwt.WithValidate(true)); err != nil {
			t.Errorf("jwx rejects the %s token: %v", name, err)
		}
		r, err := env.ClientWithKey(t, tok).ListAPIKeysWithResponse(bg, nil)
		if err != nil || r.StatusCode() != http.StatusOK {
			t.Errorf("%s token after rotation = %v %v", name, r.StatusCode(), err)
		}
	}
	msg, _ := jws.Parse([]byte(fresh.AccessToken))
	if kid, _ := msg.Signatures()[0].ProtectedHeaders().KeyID(); kid != rot.JSON201.Kid {
		t.Errorf("new token kid = %q, want %q", kid, rot.JSON201.Kid)
	}
	// The retired key's private part is gone from the vault.
	if err := env.Store.View(bg, func(tx store.Tx) error {
		if env.Vault.Has(tx, oauthserver.SigningKeyRef(oldKid)) {
			t.Errorf("the retired key's private part is still in the vault")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestOAuthRetiredKeyExpires: with a 1 s token lifetime and no leeway, a
// retired key leaves the JWKS once its tokens have expired.
func TestOAuthRetiredKeyExpires(t *testing.T) {
	env := servertest.New(t, func(c *config.Config) {
		c.OAuth.TokenTTL = config.Duration(time.Second)
		c.OAuth.Leeway = config.Duration(time.Nanosecond)
	})
	admin := env.Client(t)
	oc := createOAuthClient(t, admin, "svc", []client.Scope{client.ScopeAdmin}, nil)
	tok := issueToken(t, env, oc.Id, oc.ClientSecret, nil)
	if tok.ExpiresIn != 1 {
		t.Errorf("expires_in = %d, want 1", tok.ExpiresIn)
	}
	if r, err := admin.RotateSigningKeyWithResponse(bg); err != nil || r.StatusCode() != http.StatusCreated {
		t.Fatalf("rotate = %v %v", r, err)
	}
	if set := fetchJWKS(t, env); set.Len() != 2 {
		t.Fatalf("JWKS right after rotation has %d keys, want 2", set.Len())
	}
	time.Sleep(2100 * time.Millisecond)
	if set := fetchJWKS(t, env); set.Len() != 1 {
		t.Fatalf("JWKS after the old tokens expired has %d keys, want 1", set.Len())
	}
	res, err := env.ClientWithKey(t, tok.AccessToken).ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusUnauthorized {
		t.Fatalf("expired token = %d %s, want 401", res.StatusCode(), res.Body)
	}
}
