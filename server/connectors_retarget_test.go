package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/oauthconn/oauthtest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// TestReplaceConnector_RetargetDropsStoredCredentials: a connectors:write
// key moves where the API key goes; the stored key never reaches the new
// place, the connection is reauth_required (with its event) until the key
// is supplied again, and then it goes where the connector now says.
func TestReplaceConnector_RetargetDropsStoredCredentials(t *testing.T) {
	e := newIEnv(t)
	old := newUpstream(t, echo)
	other := newUpstreamOn(t, "127.0.0.2", echo) // another host
	otherPort := newUpstream(t, echo)            // same host, another port
	ctx := context.Background()
	_, writeKey, err := e.Server.Keys().Create(ctx, auth.NewAPIKeyInput{Name: "ops", Scopes: []string{auth.ScopeConnectorsWrite}})
	if err != nil {
		t.Fatal(err)
	}
	writer := e.ClientWithKey(t, writeKey)
	header, query := client.ConnectorAuthInHeader, client.ConnectorAuthInQuery
	apiKey := func(name string, in client.ConnectorAuthIn, prefix string) client.ConnectorAuth {
		a := client.ConnectorAuth{Type: client.ConnectorAuthAPIKey, Name: &name, In: &in}
		if prefix != "" {
			a.Prefix = &prefix
		}
		return a
	}
	tests := []struct {
		name string
		to   func() (string, client.ConnectorAuth)
		// at is the upstream the request goes to after the change.
		at *upstream
		// sent says where the upstream finds the key once supplied again.
		sent func(s seen) string
	}{
		{"baseUrl to another host", func() (string, client.ConnectorAuth) { return other.URL, apiKey("X-API-Key", header, "") }, other,
			func(s seen) string { return s.Header.Get("X-API-Key") }},
		{"baseUrl to another port", func() (string, client.ConnectorAuth) { return otherPort.URL, apiKey("X-API-Key", header, "") }, otherPort,
			func(s seen) string { return s.Header.Get("X-API-Key") }},
		{"apiKey to another header", func() (string, client.ConnectorAuth) { return old.URL, apiKey("X-Echo-Me", header, "") }, old,
			func(s seen) string { return s.Header.Get("X-Echo-Me") }},
		{"apiKey to the query", func() (string, client.ConnectorAuth) { return old.URL, apiKey("key", query, "") }, old,
			func(s seen) string { return strings.TrimPrefix(s.RequestURI, "/me?key=") }},
		{"apiKey prefix changed", func() (string, client.ConnectorAuth) { return old.URL, apiKey("X-API-Key", header, "k") }, old,
			func(s seen) string { return strings.TrimPrefix(s.Header.Get("X-API-Key"), "k") }},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "crm" + string(rune('a'+i))
			createConnector(t, e.admin, client.ConnectorInput{Name: &name, BaseUrl: old.URL, Auth: apiKey("X-API-Key", header, "")})
			createAction(t, e.admin, name, client.ActionInput{Name: connStr("me"), Method: client.ActionMethodGET, Path: "/me"})
			e.connection(name, client.ConnectionInput{ApiKey: &[]string{secretKey}[0]})
			e.mustRun(name, "me", nil)
			all := []*upstream{old, other, otherPort}
			before := make([]int, len(all))
			for i, u := range all {
				before[i] = len(u.requests())
			}

			base, a := tc.to()
			res, err := writer.ReplaceConnectorWithResponse(ctx, name, nil, client.ConnectorInput{BaseUrl: base, Auth: a})
			if err != nil || res.StatusCode() != http.StatusOK {
				t.Fatalf("replace: %v %d %s", err, res.StatusCode(), res.Body)
			}
			if c := getConnection(t, e.admin, name, "default"); c.Status != client.ReauthRequired {
				t.Fatalf("connection status = %s, want reauth_required", c.Status)
			}
			wantReauthEvent(t, e.admin, name)
			_, ae := e.run(name, "me", nil)
			wantAPIError(t, ae, http.StatusConflict, "conflict", "reauth_required", "PUT /v1/connectors/"+name+"/connections/default")
			for i, u := range all {
				if len(u.requests()) != before[i] {
					t.Fatal("an upstream was called with a reauth_required connection: the stored key went to the new place")
				}
			}

			// Supplying the key again makes the connection active.
			rc, err := e.admin.ReplaceConnectionWithResponse(ctx, name, "default", nil, client.ConnectionCredentials{ApiKey: &[]string{secretKey}[0]})
			if err != nil || rc.StatusCode() != http.StatusOK || rc.JSON200.Status != client.Active {
				t.Fatalf("replace connection: %v %d %s", err, rc.StatusCode(), rc.Body)
			}
			e.mustRun(name, "me", nil)
			if got := tc.sent(tc.at.last(t)); got != secretKey {
				t.Fatalf("after the key was supplied again the upstream found %q where the key goes", got)
			}
		})
	}

	t.Run("a path change on the same origin keeps the connection", func(t *testing.T) {
		name := "samehost"
		createConnector(t, e.admin, client.ConnectorInput{Name: &name, BaseUrl: old.URL + "/v1", Auth: apiKey("X-API-Key", header, "")})
		createAction(t, e.admin, name, client.ActionInput{Name: connStr("me"), Method: client.ActionMethodGET, Path: "/me"})
		e.connection(name, client.ConnectionInput{ApiKey: &[]string{secretKey}[0]})
		res, err := writer.ReplaceConnectorWithResponse(ctx, name, nil, client.ConnectorInput{BaseUrl: old.URL + "/v2", Auth: apiKey("x-api-key", header, "")})
		if err != nil || res.StatusCode() != http.StatusOK {
			t.Fatalf("replace: %v %d %s", err, res.StatusCode(), res.Body)
		}
		e.mustRun(name, "me", nil)
		if s := old.last(t); s.RequestURI != "/v2/me" || s.Header.Get("X-API-Key") != secretKey {
			t.Fatalf("upstream saw %s with key %q", s.RequestURI, s.Header.Get("X-API-Key"))
		}
	})
}

func getConnection(t *testing.T, c *client.ClientWithResponses, connector, name string) *client.Connection {
	t.Helper()
	res, err := c.GetConnectionWithResponse(context.Background(), connector, name)
	if err != nil || res.JSON200 == nil {
		t.Fatalf("get connection %s/%s: %v %s", connector, name, err, res.Body)
	}
	return res.JSON200
}

// wantReauthEvent checks that connection.reauth_required was recorded for
// connector's default connection, with reason connector_changed.
func wantReauthEvent(t *testing.T, c *client.ClientWithResponses, connector string) {
	t.Helper()
	typ := client.EventTypeConnectionReauthRequired
	res, err := c.ListEventsWithResponse(context.Background(), &client.ListEventsParams{Type: &typ})
	if err != nil || res.JSON200 == nil {
		t.Fatalf("list events: %v %s", err, res.Body)
	}
	for _, ev := range res.JSON200.Data {
		if ev.Data["connector"] == connector && ev.Data["name"] == "default" && ev.Data["status"] == "reauth_required" && ev.Data["reason"] == "connector_changed" {
			return
		}
	}
	t.Fatalf("no connection.reauth_required event for %s/default in %s", connector, res.Body)
}

// TestReplaceConnector_OAuthTokenURLNeedsClientSecret: the stored client
// secret never goes to a new token endpoint; with it given again the
// client-credentials connection keeps working against the new provider, and
// authorization-code connections must connect again.
func TestReplaceConnector_OAuthTokenURLNeedsClientSecret(t *testing.T) {
	e := newOCEnv(t, oauthtest.Options{})
	moved := oauthtest.New(t, oauthtest.Options{ClientID: "moved-client"})
	e.createOAuthConnector("machine", client.ConnectorGrantClientCredentials, nil)
	e.addMeAction("machine")
	if res := e.run(e.client(), "machine", "default"); res.StatusCode() != 200 {
		t.Fatalf("run: %d %s", res.StatusCode(), res.Body)
	}
	grant := client.ConnectorGrantClientCredentials
	to := func(base, tokenURL, clientID string, secret *string) client.ConnectorInput {
		return client.ConnectorInput{BaseUrl: base, Auth: client.ConnectorAuth{Type: client.ConnectorAuthOAuth2, Grant: &grant,
			TokenUrl: &tokenURL, ClientId: &clientID, ClientSecret: secret}}
	}
	replace := func(in client.ConnectorInput) *client.ReplaceConnectorResponse {
		t.Helper()
		res, err := e.client().ReplaceConnectorWithResponse(context.Background(), "machine", nil, in)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	for _, tc := range []struct {
		name string
		in   client.ConnectorInput
		want string
	}{
		{"tokenUrl moved", to(e.as.APIURL(), moved.TokenURL(), e.as.ClientID, nil), "tokenUrl changed: send clientSecret again"},
		{"baseUrl moved (client_credentials)", to(strings.Replace(e.as.APIURL(), "127.0.0.1", "localhost", 1), e.as.TokenURL(), e.as.ClientID, nil), "baseUrl moved to another origin"},
	} {
		t.Run(tc.name+" without clientSecret is refused", func(t *testing.T) {
			res := replace(tc.in)
			if res.StatusCode() != http.StatusUnprocessableEntity {
				t.Fatalf("replace = %d %s, want 422", res.StatusCode(), res.Body)
			}
			assertExactProblems(t, res.Body, map[string]string{"auth.clientSecret": tc.want})
		})
	}
	if n := moved.TokenRequests("client_credentials"); n != 0 {
		t.Fatalf("the new token endpoint got %d requests", n)
	}

	t.Run("with clientSecret the connection stays active and uses the new provider", func(t *testing.T) {
		res := replace(to(moved.APIURL(), moved.TokenURL(), moved.ClientID, &moved.ClientSecret))
		if res.StatusCode() != http.StatusOK {
			t.Fatalf("replace = %d %s", res.StatusCode(), res.Body)
		}
		if c := e.connection("machine", "default"); c.Status != client.Active {
			t.Fatalf("status = %s, want active", c.Status)
		}
		if r := e.run(e.client(), "machine", "default"); r.StatusCode() != 200 || !strings.Contains(string(r.Body), "moved-client") {
			t.Fatalf("run: %d %s", r.StatusCode(), r.Body)
		}
		if n := moved.TokenRequests("client_credentials"); n != 1 {
			t.Fatalf("the new token endpoint got %d requests, want 1", n)
		}
	})

	t.Run("authorization_code connections must connect again", func(t *testing.T) {
		e.createOAuthConnector("crm", client.ConnectorGrantAuthorizationCode, nil)
		e.addMeAction("crm")
		e.connectBrowser("crm", "default")
		if r := e.run(e.client(), "crm", "default"); r.StatusCode() != 200 {
			t.Fatalf("run: %d %s", r.StatusCode(), r.Body)
		}
		calls, _ := e.as.APICalls()
		g := client.ConnectorGrantAuthorizationCode
		in := client.ConnectorInput{BaseUrl: strings.Replace(e.as.APIURL(), "127.0.0.1", "localhost", 1), Auth: client.ConnectorAuth{
			Type: client.ConnectorAuthOAuth2, Grant: &g, TokenUrl: connStr(e.as.TokenURL()), AuthorizationUrl: connStr(e.as.AuthorizeURL()),
			ClientId: connStr(e.as.ClientID), RedirectUrls: &[]string{e.app.URL + "/done"}}}
		res, err := e.client().ReplaceConnectorWithResponse(context.Background(), "crm", nil, in)
		if err != nil || res.StatusCode() != http.StatusOK {
			t.Fatalf("replace: %v %d %s", err, res.StatusCode(), res.Body)
		}
		if c := e.connection("crm", "default"); c.Status != client.ReauthRequired {
			t.Fatalf("status = %s, want reauth_required", c.Status)
		}
		r := e.run(e.client(), "crm", "default")
		if r.StatusCode() != http.StatusConflict || !strings.Contains(string(r.Body), "connector's baseUrl, auth type or tokenUrl changed") {
			t.Fatalf("run after the move: %d %s", r.StatusCode(), r.Body)
		}
		if now, _ := e.as.APICalls(); now != calls {
			t.Fatal("the access token was sent after the move")
		}
		e.connectBrowser("crm", "default")
		if c := e.connection("crm", "default"); c.Status != client.Active {
			t.Fatalf("status after connecting again = %s", c.Status)
		}
		if r := e.run(e.client(), "crm", "default"); r.StatusCode() != 200 {
			t.Fatalf("run after connecting again: %d %s", r.StatusCode(), r.Body)
		}
	})
}

// TestRun_InvokeOnlyCannotCreateClientCredentialsConnections: an invoke key
// naming a connection that does not exist gets 404 and creates nothing;
// connectors:write may create it on first use or with POST.
func TestRun_InvokeOnlyCannotCreateClientCredentialsConnections(t *testing.T) {
	e := newOCEnv(t, oauthtest.Options{})
	e.createOAuthConnector("machine", client.ConnectorGrantClientCredentials, nil)
	e.addMeAction("machine")
	invoker := e.ClientWithKey(t, e.keyWith(auth.ScopeInvoke))
	writer := e.ClientWithKey(t, e.keyWith(auth.ScopeInvoke, auth.ScopeConnectorsWrite))

	res := e.run(invoker, "machine", "tenant-a")
	if res.StatusCode() != http.StatusNotFound || !strings.Contains(string(res.Body), `connection \"tenant-a\" of connector \"machine\" does not exist; create it with POST /v1/connectors/machine/connections (scope connectors:write)`) {
		t.Fatalf("invoke-only run with a new connection: %d %s", res.StatusCode(), res.Body)
	}
	if got, err := e.client().GetConnectionWithResponse(context.Background(), "machine", "tenant-a"); err != nil || got.StatusCode() != http.StatusNotFound {
		t.Fatalf("the run created the connection: %v %d", err, got.StatusCode())
	}
	if n := e.as.TokenRequests("client_credentials"); n != 0 {
		t.Fatalf("%d token requests for a refused run", n)
	}
	typ := client.EventTypeConnectionCreated
	if ev, err := e.client().ListEventsWithResponse(context.Background(), &client.ListEventsParams{Type: &typ}); err != nil || ev.JSON200 == nil || len(ev.JSON200.Data) != 0 {
		t.Fatalf("connection.created recorded for a refused run: %v %s", err, ev.Body)
	}

	for _, tc := range []struct {
		name       string
		c          *client.ClientWithResponses
		connection string
	}{
		{"invoke-only, default connection", invoker, "default"},
		{"connectors:write creates on first use", writer, "tenant-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := e.run(tc.c, "machine", tc.connection); r.StatusCode() != 200 {
				t.Fatalf("run: %d %s", r.StatusCode(), r.Body)
			}
			if c := e.connection("machine", tc.connection); c.Status != client.Active {
				t.Fatalf("status = %s", c.Status)
			}
		})
	}

	t.Run("created with POST, then usable by invoke-only", func(t *testing.T) {
		cr, err := e.client().CreateConnectionWithResponse(context.Background(), "machine", client.ConnectionInput{Name: connStr("tenant-a")})
		if err != nil || cr.StatusCode() != http.StatusCreated {
			t.Fatalf("create: %v %d %s", err, cr.StatusCode(), cr.Body)
		}
		if r := e.run(invoker, "machine", "tenant-a"); r.StatusCode() != 200 {
			t.Fatalf("run: %d %s", r.StatusCode(), r.Body)
		}
	})
}

// TestConnectorBaseURLEgress: a baseUrl the egress guard refuses is a 422
// on baseUrl at create and replace, saying how to allow it.
func TestConnectorBaseURLEgress(t *testing.T) {
	env := servertest.New(t, func(c *config.Config) { c.Egress.Allow = []string{"10.20.0.0/16"} })
	c := env.Client(t)
	none := client.ConnectorAuth{Type: client.ConnectorAuthNone}
	for _, tc := range []struct{ name, url, want string }{
		{"loopback literal", "http://127.0.0.1:8080/v1", "127.0.0.1 is a loopback address"},
		{"IPv6 loopback", "http://[::1]:8080", "::1 is a loopback address"},
		{"metadata address", "http://169.254.169.254/latest", "169.254.169.254 is a link-local cloud metadata address"},
		{"private range", "https://192.168.1.10", "192.168.1.10 is a private (RFC 1918) address"},
		{"name resolving only to loopback", "http://localhost:8080", "resolved from localhost"},
	} {
		t.Run(tc.name+" is refused on create", func(t *testing.T) {
			res, err := c.CreateConnectorWithResponse(connCtx, client.ConnectorInput{Name: connStr("api"), BaseUrl: tc.url, Auth: none})
			if err != nil || res.StatusCode() != http.StatusUnprocessableEntity {
				t.Fatalf("create = %v %d %s, want 422", err, res.StatusCode(), res.Body)
			}
			assertExactProblems(t, res.Body, map[string]string{"baseUrl": tc.want})
			if !strings.Contains(string(res.Body), "egress.allow (SWITCHBOARD_EGRESS_ALLOW)") {
				t.Fatalf("the problem does not say how to allow it: %s", res.Body)
			}
		})
	}
	for _, tc := range []struct{ name, url string }{
		{"allowed range", "http://10.20.3.4:8080"},
		{"name that does not resolve", "https://api.invalid"},
	} {
		t.Run(tc.name+" is accepted", func(t *testing.T) {
			name := strings.ReplaceAll(strings.Fields(tc.name)[0], "-", "_")
			createConnector(t, c, client.ConnectorInput{Name: &name, BaseUrl: tc.url, Auth: none})
		})
	}
	t.Run("replace to a refused address is refused", func(t *testing.T) {
		res, err := c.ReplaceConnectorWithResponse(connCtx, "allowed", nil, client.ConnectorInput{BaseUrl: "http://127.0.0.1:9", Auth: none})
		if err != nil || res.StatusCode() != http.StatusUnprocessableEntity {
			t.Fatalf("replace = %v %d %s, want 422", err, res.StatusCode(), res.Body)
		}
		assertExactProblems(t, res.Body, map[string]string{"baseUrl": "loopback"})
	})
}

// TestCreateConnector_WithoutAuthUsesNone: auth is optional and defaults to
// none, on create and replace.
func TestCreateConnector_WithoutAuthUsesNone(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	got := createConnector(t, c, client.ConnectorInput{Name: connStr("open"), BaseUrl: "https://api.invalid"})
	if got.Auth.Type != client.ConnectorAuthNone {
		t.Fatalf("auth.type = %q, want none", got.Auth.Type)
	}
	res, err := c.ReplaceConnectorWithResponse(connCtx, "open", nil, client.ConnectorInput{BaseUrl: "https://api.invalid/v2"})
	if err != nil || res.JSON200 == nil || res.JSON200.Auth.Type != client.ConnectorAuthNone {
		t.Fatalf("replace without auth: %v %s", err, res.Body)
	}
}
