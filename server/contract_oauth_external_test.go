package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// idp is an external authorization server: it publishes a JWKS (built
// with jwx) and counts how often it is fetched.
type idp struct {
	mu      sync.Mutex
	keys    map[string]*ecdsa.PrivateKey
	fetches atomic.Int64
	srv     *httptest.Server
}

func newIDP(t *testing.T) *idp {
	i := &idp{keys: map[string]*ecdsa.PrivateKey{}}
	i.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i.fetches.Add(1)
		i.mu.Lock()
		defer i.mu.Unlock()
		set := jwk.NewSet()
		for kid, k := range i.keys {
			pub, err := jwk.Import(&k.PublicKey)
			if err != nil {
				t.Error(err)
				return
			}
			_ = pub.Set(jwk.KeyIDKey, kid)
			_ = pub.Set(jwk.AlgorithmKey, jwa.ES256())
			_ = pub.Set(jwk.KeyUsageKey, "sig")
			_ = set.AddKey(pub)
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(i.srv.Close)
	return i
}

func (i *idp) addKey(kid string) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	i.mu.Lock()
	i.keys[kid] = k
	i.mu.Unlock()
	return k
}

func TestExternalIssuerTokens(t *testing.T) {
	provider := newIDP(t)
	k1 := provider.addKey("k1")
	env := servertest.New(t, func(c *config.Config) {
		c.OAuth.ExternalIssuers = []config.ExternalIssuer{{
			Issuer: "https://idp.test/", Audience: "switchboard-api", JWKSURL: provider.srv.URL + "/jwks",
			ScopesClaim: "permissions", MinRefreshInterval: config.Duration(300 * time.Millisecond),
		}}
	})
	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{
			"iss": "https://idp.test/", "aud": []string{"switchboard-api", "other"}, "sub": "user-1",
			"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "permissions": []string{"admin", "unknown:scope"},
		}
		if mod != nil {
			mod(c)
		}
		return c
	}
	call := func(t *testing.T, tok string) (int, string) {
		t.Helper()
		res, err := env.ClientWithKey(t, tok).ListAPIKeysWithResponse(bg, nil)
		if err != nil {
			t.Fatal(err)
		}
		msg := ""
		if res.JSON401 != nil {
			msg = res.JSON401.Error.Message
		} else if res.JSON403 != nil {
			msg = res.JSON403.Error.Message
		}
		return res.StatusCode(), msg
	}

	good := forge(t, jwa.ES256(), k1, "k1", "", claims(nil))
	if st, msg := call(t, good); st != http.StatusOK {
		t.Fatalf("valid external token = %d %s", st, msg)
	}
	if st, _ := call(t, good); st != http.StatusOK || provider.fetches.Load() != 1 {
		t.Fatalf("second use = %d after %d JWKS fetches, want 200 after 1", st, provider.fetches.Load())
	}

	_, stranger := forgeKey(t)
	tests := []struct {
		name   string
		token  string
		status int
		msg    string
	}{
		{"scope given as a string", forge(t, jwa.ES256(), k1, "k1", "", claims(func(c map[string]any) { c["permissions"] = "llm admin" })), 200, ""},
		{"missing scope", forge(t, jwa.ES256(), k1, "k1", "", claims(func(c map[string]any) { c["permissions"] = []string{"llm"} })), 403, "lacks scope admin"},
		{"wrong audience", forge(t, jwa.ES256(), k1, "k1", "", claims(func(c map[string]any) { c["aud"] = "switchboard" })), 401, "audience"},
		{"expired", forge(t, jwa.ES256(), k1, "k1", "", claims(func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() })), 401, "expired"},
		{"no subject", forge(t, jwa.ES256(), k1, "k1", "", claims(func(c map[string]any) { delete(c, "sub") })), 401, "no sub"},
		{"wrongly signed", forge(t, jwa.ES256(), stranger, "k1", "", claims(nil)), 401, "signature is invalid"},
		{"other issuer", forge(t, jwa.ES256(), k1, "k1", "", claims(func(c map[string]any) { c["iss"] = "https://idp.test" })), 401, "not trusted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, msg := call(t, tc.token)
			if st != tc.status || !strings.Contains(msg, tc.msg) {
				t.Fatalf("= %d %q, want %d with %q", st, msg, tc.status, tc.msg)
			}
		})
	}
	if n := provider.fetches.Load(); n != 1 {
		t.Fatalf("%d JWKS fetches, want 1: known keys are cached", n)
	}

	t.Run("unknown kid refetches at most every minRefreshInterval", func(t *testing.T) {
		time.Sleep(350 * time.Millisecond)
		k9 := provider.addKey("k9-unpublished")
		provider.mu.Lock()
		delete(provider.keys, "k9-unpublished")
		provider.mu.Unlock()
		for i := range 3 {
			st, _ := call(t, forge(t, jwa.ES256(), k9, "k9", "", claims(func(c map[string]any) { c["jti"] = "t" + strconv.Itoa(i) })))
			if st != http.StatusUnauthorized {
				t.Fatalf("unknown kid = %d", st)
			}
		}
		if n := provider.fetches.Load(); n != 2 {
			t.Fatalf("%d JWKS fetches after 3 tokens with an unknown kid, want 2 (one refetch)", n)
		}
	})

	t.Run("issuer rotation is picked up on the new kid", func(t *testing.T) {
		k2 := provider.addKey("k2")
		time.Sleep(350 * time.Millisecond)
		if st, msg := call(t, forge(t, jwa.ES256(), k2, "k2", "", claims(nil))); st != http.StatusOK {
			t.Fatalf("token of the rotated key = %d %s", st, msg)
		}
		if n := provider.fetches.Load(); n != 3 {
			t.Fatalf("%d JWKS fetches, want 3", n)
		}
	})
}

func forgeKey(t *testing.T) (string, *ecdsa.PrivateKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return "stranger", k
}
