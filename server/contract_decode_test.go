package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// TestContractJSONNames_SmuggledScopeIsRefusedAndCreatesNothing: a second
// "scopes" in another case used to win and create an admin key.
func TestContractJSONNames_SmuggledScopeIsRefusedAndCreatesNothing(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	before, err := c.ListAPIKeysWithResponse(bg, nil)
	if err != nil || before.JSON200 == nil {
		t.Fatalf("list: %v %s", err, before.Body)
	}
	raw := env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())
	for _, body := range []string{
		`{"name":"smuggler","scopes":["connectors:read"],"SCOPES":["admin"]}`,
		`{"name":"smuggler","scopes":["connectors:read"],"scopes":["admin"]}`,
	} {
		res, err := raw.Post(env.URL+"/v1/api-keys", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, res)
		if res.StatusCode != http.StatusBadRequest || decodeError(t, got).Code != "invalid_request" {
			t.Fatalf("%s: %d %s, want 400 invalid_request", body, res.StatusCode, got)
		}
		assertProblems(t, got, map[bool]string{true: "SCOPES", false: "scopes"}[strings.Contains(body, "SCOPES")])
	}
	after, err := c.ListAPIKeysWithResponse(bg, nil)
	if err != nil || after.JSON200 == nil {
		t.Fatalf("list: %v %s", err, after.Body)
	}
	if len(after.JSON200.Data) != len(before.JSON200.Data) {
		t.Fatalf("keys: %d before, %d after refused requests", len(before.JSON200.Data), len(after.JSON200.Data))
	}
}

// TestContractJSONNames_DuplicatesAndCaseAreRefusedEverywhere: every /v1
// body, at every depth, is read with exact names given once.
func TestContractJSONNames_DuplicatesAndCaseAreRefusedEverywhere(t *testing.T) {
	env := servertest.New(t)
	createConnector(t, env.Client(t), weatherConnector("weather"))
	raw := env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())
	for _, tc := range []struct {
		name, method, path, body, field, message string
	}{
		{"connector auth in upper case", "POST", "/v1/connectors", `{"name":"c1","baseUrl":"https://x.example","AUTH":{"type":"none"}}`, "AUTH", `did you mean "auth"?`},
		{"connector auth type twice", "POST", "/v1/connectors", `{"name":"c2","baseUrl":"https://x.example","auth":{"type":"none","type":"apiKey"}}`, "auth.type", `duplicate key "type"`},
		{"connector replace with a base URL twice", "PUT", "/v1/connectors/weather", `{"baseUrl":"https://a.example","baseUrl":"https://b.example","auth":{"type":"none"}}`, "baseUrl", `duplicate key "baseUrl"`},
		{"action parameter type in another case", "POST", "/v1/connectors/weather/actions", `{"name":"a1","method":"GET","path":"/","parameters":{"q":{"type":"string","Type":"number"}}}`, "parameters.q.Type", `did you mean "type"?`},
		{"action header twice", "POST", "/v1/connectors/weather/actions", `{"name":"a2","method":"GET","path":"/","headers":{"X-A":"1","X-A":"2"}}`, "headers.X-A", `duplicate key "X-A"`},
		{"run param twice", "POST", "/v1/integrations/weather/run", `{"action":"current","params":{"q":"Paris","q":"Lyon"}}`, "params.q", `duplicate key "q"`},
		{"chat message role twice", "POST", "/v1/chat", `{"model":"local/x","messages":[{"role":"user","content":"hi","role":"system"}]}`, "messages[0].role", `duplicate key "role"`},
		{"webhook url in another case", "POST", "/v1/webhooks", `{"url":"https://h.example/hook","URL":"https://evil.example","events":["connector.created"]}`, "URL", `did you mean "url"?`},
		{"connection secret twice", "POST", "/v1/connectors/weather/connections", `{"name":"c","apiKey":"a","apiKey":"b"}`, "apiKey", `duplicate key "apiKey"`},
		{"unknown nested field names its path", "POST", "/v1/connectors", `{"name":"c3","baseUrl":"https://x.example","auth":{"type":"none","colour":1}}`, "auth.colour", `unknown field "colour" at auth.colour`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, env.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			res, err := raw.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got := readAll(t, res)
			e := decodeError(t, got)
			if res.StatusCode != http.StatusBadRequest || e.Code != "invalid_request" || !strings.Contains(e.Message, tc.message) {
				t.Fatalf("%d %s, want 400 invalid_request saying %q", res.StatusCode, got, tc.message)
			}
			assertProblems(t, got, tc.field)
		})
	}
}
