package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// BenchmarkAuthenticatedRequest serves GET /v1/oauth/signing-keys (an
// in-memory admin route) through the whole Echo stack, without network,
// to show what authentication and rate limiting add per request:
// compare "limiter off" with "limiter on", and API keys with access tokens.
//
//	go test ./server/ -run '^$' -bench BenchmarkAuthenticatedRequest -benchmem
func BenchmarkAuthenticatedRequest(b *testing.B) {
	for _, limited := range []bool{false, true} {
		env := servertest.New(b, func(c *config.Config) {
			c.Limits.RequestsPerMinute, c.Limits.ControlPlaneRequestsPerMinute = 0, 0
			if limited {
				c.Limits.RequestsPerMinute, c.Limits.ControlPlaneRequestsPerMinute = 1<<30, 1<<30
			}
		})
		oc := createOAuthClientB(b, env)
		tok := issueTokenB(b, env, oc)
		name := "limiter off"
		if limited {
			name = "limiter on"
		}
		for _, cred := range []struct{ kind, secret string }{{"API key", env.AdminKey}, {"access token", tok}} {
			b.Run(name+"/"+cred.kind, func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, "/v1/oauth/signing-keys", nil)
				req.Header.Set("Authorization", "Bearer "+cred.secret)
				for b.Loop() {
					w := httptest.NewRecorder()
					env.Server.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("= %d %s", w.Code, w.Body)
					}
				}
			})
		}
	}
}

func createOAuthClientB(b *testing.B, env *servertest.Env) *client.OAuthClientCreated {
	c, err := client.NewClientWithResponses(env.URL, client.WithRequestEditorFn(bearer(env.AdminKey)))
	if err != nil {
		b.Fatal(err)
	}
	res, err := c.CreateOAuthClientWithResponse(bg, client.OAuthClientCreate{Name: "bench", Scopes: []client.Scope{client.ScopeAdmin}})
	if err != nil || res.JSON201 == nil {
		b.Fatalf("create client = %v %v", res, err)
	}
	return res.JSON201
}

func issueTokenB(b *testing.B, env *servertest.Env, oc *client.OAuthClientCreated) string {
	c, err := client.NewClientWithResponses(env.URL)
	if err != nil {
		b.Fatal(err)
	}
	auth := basic(oc.Id, oc.ClientSecret)
	res, err := c.CreateOAuthTokenWithFormdataBodyWithResponse(bg, &client.CreateOAuthTokenParams{Authorization: &auth}, client.OAuthTokenRequest{GrantType: "client_credentials"})
	if err != nil || res.JSON200 == nil {
		b.Fatalf("token = %v %v", res, err)
	}
	return res.JSON200.AccessToken
}

// bearer sets Authorization: Bearer key on a generated-client request.
func bearer(key string) client.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+key)
		return nil
	}
}
