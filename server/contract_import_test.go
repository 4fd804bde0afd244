package server_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// importEvents counts the recorded events of typ.
func importEvents(t *testing.T, c *client.ClientWithResponses, typ client.EventType) int {
	t.Helper()
	res, err := c.ListEventsWithResponse(bg, &client.ListEventsParams{Type: &typ, Limit: ptrTo(100)})
	if err != nil || res.JSON200 == nil {
		t.Fatalf("list events: %v", err)
	}
	return len(res.JSON200.Data)
}

func postImport(t *testing.T, c *client.ClientWithResponses, in client.OpenAPIImportRequest) *client.ImportOpenAPIResponse {
	t.Helper()
	res, err := c.ImportOpenAPIWithResponse(bg, in)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestContractImportOpenAPI: a dry run writes nothing; an import creates
// the connector and its actions with their events; importing again
// changes nothing; a changed description replaces what changed and keeps
// the connector as it is.
func TestContractImportOpenAPI(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)
	spec, err := os.ReadFile("openapiimport/testdata/petstore30.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in := client.OpenAPIImportRequest{Connector: "pets", Spec: string(spec), Tags: &[]string{"pets", "sessions"}}

	outcomes := func(r *client.OpenAPIImportResult) map[string]string {
		m := map[string]string{}
		for _, a := range r.Actions {
			m[a.Name] = string(a.Outcome)
			if a.Action.Connector != "pets" || a.Action.Name != a.Name {
				t.Errorf("action %s is %s.%s", a.Name, a.Action.Connector, a.Action.Name)
			}
		}
		return m
	}
	all := func(m map[string]string, want string) bool {
		for _, o := range m {
			if o != want {
				return false
			}
		}
		return len(m) == 7
	}

	t.Run("dry run creates nothing", func(t *testing.T) {
		dry := in
		dry.DryRun = ptrTo(true)
		res := postImport(t, admin, dry)
		if res.StatusCode() != http.StatusOK || res.JSON200 == nil {
			t.Fatalf("dry run = %d %s", res.StatusCode(), res.Body)
		}
		r := res.JSON200
		if !r.DryRun || r.ConnectorOutcome != client.ConnectorImportCreated || !all(outcomes(r), "created") {
			t.Errorf("dry run = %s", res.Body)
		}
		if len(r.Skipped) != 1 || r.Skipped[0].Operation != "GET /session" || !strings.Contains(r.Skipped[0].Reason, "cookie") {
			t.Errorf("skipped = %+v", r.Skipped)
		}
		if got, _ := admin.GetConnectorWithResponse(bg, "pets"); got.StatusCode() != http.StatusNotFound {
			t.Errorf("after a dry run, GET connector = %d", got.StatusCode())
		}
		if n := importEvents(t, admin, client.EventTypeActionCreated); n != 0 {
			t.Errorf("%d action.created events after a dry run", n)
		}
	})

	t.Run("import creates the connector and actions, with events", func(t *testing.T) {
		res := postImport(t, admin, in)
		if res.StatusCode() != http.StatusOK || res.JSON200 == nil {
			t.Fatalf("import = %d %s", res.StatusCode(), res.Body)
		}
		r := res.JSON200
		if r.DryRun || r.ConnectorOutcome != client.ConnectorImportCreated || r.Connector.Version != 1 || !all(outcomes(r), "created") {
			t.Errorf("import = %s", res.Body)
		}
		got, err := admin.GetActionWithResponse(bg, "pets", "create_pet")
		if err != nil || got.JSON200 == nil || got.JSON200.Body == nil {
			t.Fatalf("GET create_pet = %v %s", err, got.Body)
		}
		if n := importEvents(t, admin, client.EventTypeConnectorCreated); n != 1 {
			t.Errorf("%d connector.created events, want 1", n)
		}
		if n := importEvents(t, admin, client.EventTypeActionCreated); n != 7 {
			t.Errorf("%d action.created events, want 7", n)
		}
	})

	t.Run("importing again changes nothing", func(t *testing.T) {
		res := postImport(t, admin, in)
		if res.JSON200 == nil || res.JSON200.ConnectorOutcome != client.ConnectorImportUnchanged || !all(outcomes(res.JSON200), "unchanged") {
			t.Fatalf("second import = %d %s", res.StatusCode(), res.Body)
		}
		if n := importEvents(t, admin, client.EventTypeActionUpdated); n != 0 {
			t.Errorf("%d action.updated events, want 0", n)
		}
	})

	t.Run("a changed description replaces what changed, and keeps the connector", func(t *testing.T) {
		changed := in
		changed.Spec = strings.Replace(string(spec), "summary: List pets.", "summary: List all the pets.", 1)
		changed.BaseUrl = ptrTo("https://elsewhere.example")
		res := postImport(t, admin, changed)
		if res.JSON200 == nil {
			t.Fatalf("import = %d %s", res.StatusCode(), res.Body)
		}
		o := outcomes(res.JSON200)
		if o["list_pets"] != "replaced" || o["create_pet"] != "unchanged" || res.JSON200.Connector.BaseUrl != "https://eu.pets.example/v1" {
			t.Errorf("outcomes = %v, connector %+v", o, res.JSON200.Connector)
		}
		if n := importEvents(t, admin, client.EventTypeActionUpdated); n != 1 {
			t.Errorf("%d action.updated events, want 1", n)
		}
	})
}

func TestContractImportOpenAPI_Refusals(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)
	reader := createKey(t, admin, "reader", []client.Scope{client.ScopeConnectorsRead}, nil)
	petSpec := map[string]any{
		"openapi": "3.0.3", "info": map[string]any{"title": "x", "version": "1"},
		"servers": []any{map[string]any{"url": "https://x.example"}},
		"paths":   map[string]any{"/a": map[string]any{"get": map[string]any{"operationId": "a"}}},
	}
	oauth := map[string]any{
		"openapi": "3.0.3", "info": map[string]any{"title": "x", "version": "1"},
		"servers": []any{map[string]any{"url": "https://x.example"}}, "paths": map[string]any{},
		"components": map[string]any{"securitySchemes": map[string]any{"o": map[string]any{"type": "oauth2",
			"flows": map[string]any{"authorizationCode": map[string]any{"authorizationUrl": "https://x.example/a", "tokenUrl": "https://x.example/t", "scopes": map[string]any{}}}}}},
	}
	tests := []struct {
		name   string
		c      *client.ClientWithResponses
		in     client.OpenAPIImportRequest
		status int
		want   string
	}{
		{"a spec that does not parse names where", admin, client.OpenAPIImportRequest{Connector: "x", Spec: "{\"openapi\": \"3.0.0\",\n\"paths\": [}"}, 400, "line 2, column 11"},
		{"a spec that is not a description", admin, client.OpenAPIImportRequest{Connector: "x", Spec: map[string]any{"hello": "world"}}, 400, "neither an openapi nor a swagger field"},
		{"an unknown tag", admin, client.OpenAPIImportRequest{Connector: "x", Spec: petSpec, Tags: &[]string{"nope"}}, 422, `no operation has tag \"nope\"`},
		{"oauth2 without a client id", admin, client.OpenAPIImportRequest{Connector: "x", Spec: oauth}, 422, "connector.auth.clientId"},
		{"without connectors:write", env.ClientWithKey(t, reader.Key), client.OpenAPIImportRequest{Connector: "x", Spec: petSpec}, 403, "connectors:write"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := postImport(t, tc.c, tc.in)
			if res.StatusCode() != tc.status || !strings.Contains(string(res.Body), tc.want) {
				t.Errorf("= %d %s, want %d with %q", res.StatusCode(), res.Body, tc.status, tc.want)
			}
		})
	}
	if got, _ := admin.GetConnectorWithResponse(bg, "x"); got.StatusCode() != http.StatusNotFound {
		t.Errorf("a refused import created the connector: %d", got.StatusCode())
	}

	t.Run("oauth2 with auth given in the request", func(t *testing.T) {
		grant := client.ConnectorGrantAuthorizationCode
		res := postImport(t, admin, client.OpenAPIImportRequest{Connector: "o", Spec: oauth, Auth: &client.ConnectorAuth{
			Type: client.ConnectorAuthOAuth2, Grant: &grant, ClientId: ptrTo("client"), TokenUrl: ptrTo("https://x.example/t"), AuthorizationUrl: ptrTo("https://x.example/a"),
		}})
		if res.JSON200 == nil || res.JSON200.Connector.Auth.ClientId == nil {
			t.Errorf("= %d %s", res.StatusCode(), res.Body)
		}
	})
}
