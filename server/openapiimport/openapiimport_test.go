package openapiimport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/openapiimport"
)

var bg = context.Background()

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func importFixture(t *testing.T, name string, opts openapiimport.Options) openapiimport.Result {
	t.Helper()
	if opts.Connector == "" {
		opts.Connector = "t"
	}
	res, err := openapiimport.Import(bg, fixture(t, name), opts)
	if err != nil {
		t.Fatalf("Import(%s) = %v (%v)", name, err, errs.ProblemsOf(err))
	}
	checkValid(t, res)
	return res
}

// checkValid requires every action to pass the server's validation.
func checkValid(t testing.TB, res openapiimport.Result) {
	t.Helper()
	for _, a := range res.Actions {
		if ps := connectors.ValidateAction(a, 0); len(ps) > 0 {
			t.Errorf("action %s does not validate: %v", a.Name, ps)
		}
		if a.Connector != res.Connector.Name {
			t.Errorf("action %s has connector %q", a.Name, a.Connector)
		}
	}
}

func names(res openapiimport.Result) []string {
	var out []string
	for _, a := range res.Actions {
		out = append(out, a.Name)
	}
	return out
}

func action(t *testing.T, res openapiimport.Result, name string) connectors.Action {
	t.Helper()
	for _, a := range res.Actions {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no action %s in %v", name, names(res))
	return connectors.Action{}
}

func TestImport_Formats(t *testing.T) {
	tests := []struct {
		name, file  string
		baseURL     string
		auth        connectors.Auth
		actions     []string
		skipped     map[string]string // operation → part of the reason
		displayName string
	}{
		{
			name: "OpenAPI 3.0 YAML", file: "petstore30.yaml",
			baseURL:     "https://eu.pets.example/v1",
			auth:        connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-Pet-Key", In: "header"},
			actions:     []string{"list_pets", "create_pet", "replace_pets", "get_pet_by_id", "delete_pets_pet_id_visits", "get_pet_by_id_2", "update_pet", "search_pets"},
			skipped:     map[string]string{"POST /pets/{petId}/photo": "multipart/form-data only", "GET /session": "required cookie parameter \"sid\""},
			displayName: "Pet Store",
		},
		{
			name: "OpenAPI 3.1 JSON", file: "api31.json",
			baseURL: "https://notes.example/api",
			auth:    connectors.Auth{Type: connectors.AuthBearer},
			actions: []string{"notes_create", "notes_get", "notes_replace"},
			skipped: map[string]string{"TRACE /notes/{id}/raw": "method TRACE is not supported"},
		},
		{
			name: "Swagger 2.0", file: "swagger2.json",
			baseURL: "https://tasks.example.com/api/v2",
			auth: connectors.Auth{Type: connectors.AuthOAuth2, Grant: connectors.GrantAuthorizationCode,
				AuthorizationURL: "https://tasks.example.com/oauth/authorize", TokenURL: "https://tasks.example.com/oauth/token",
				Scopes: []string{"tasks:read", "tasks:write"}},
			actions: []string{"list_tasks", "create_task"},
			skipped: map[string]string{"POST /tasks/{taskId}/attachments": "multipart/form-data only"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := importFixture(t, tc.file, openapiimport.Options{})
			c := res.Connector
			if c.BaseURL != tc.baseURL {
				t.Errorf("baseUrl = %q, want %q", c.BaseURL, tc.baseURL)
			}
			got, _ := json.Marshal(c.Auth)
			want, _ := json.Marshal(tc.auth)
			if !bytes.Equal(got, want) {
				t.Errorf("auth = %s, want %s", got, want)
			}
			if tc.displayName != "" && c.DisplayName != tc.displayName {
				t.Errorf("displayName = %q", c.DisplayName)
			}
			if !slices.Equal(names(res), tc.actions) {
				t.Errorf("actions = %v, want %v", names(res), tc.actions)
			}
			if len(res.Skipped) != len(tc.skipped) {
				t.Errorf("skipped = %+v, want %d", res.Skipped, len(tc.skipped))
			}
			for _, s := range res.Skipped {
				if want, ok := tc.skipped[s.Operation]; !ok || !strings.Contains(s.Reason, want) {
					t.Errorf("skipped %s: %q, want it with %q", s.Operation, s.Reason, want)
				}
				if s.OperationID == "" {
					t.Errorf("skipped %s without its operationId", s.Operation)
				}
			}
		})
	}
}

func TestImport_Parameters(t *testing.T) {
	pets := importFixture(t, "petstore30.yaml", openapiimport.Options{})
	notes := importFixture(t, "api31.json", openapiimport.Options{})
	tasks := importFixture(t, "swagger2.json", openapiimport.Options{})
	tests := []struct {
		name   string
		action connectors.Action
		check  func(t *testing.T, a connectors.Action)
	}{
		{"query types, defaults and enums without null", action(t, pets, "list_pets"), func(t *testing.T, a connectors.Action) {
			l := a.Parameters["limit"]
			if l.Type != "integer" || l.In != "query" || l.Default != float64(20) || l.Required {
				t.Errorf("limit = %+v", l)
			}
			s := a.Parameters["status"]
			if !slices.Equal(s.Enum, []any{"available", "sold"}) || s.Default != "available" || s.Description != "Filter by status." {
				t.Errorf("status = %+v", s)
			}
		}},
		{"a header named unlike a parameter is sent by a header template", action(t, pets, "list_pets"), func(t *testing.T, a connectors.Action) {
			if a.Headers["X-Request-Id"] != "{{params.X_Request_Id}}" || a.Parameters["X_Request_Id"].In != "" {
				t.Errorf("headers = %v, parameters = %v", a.Headers, a.Parameters)
			}
		}},
		{"the credential's header is not a parameter", action(t, pets, "list_pets"), func(t *testing.T, a connectors.Action) {
			if len(a.Parameters) != 3 {
				t.Errorf("parameters = %v, want limit, status, X_Request_Id", a.Parameters)
			}
		}},
		{"object body: properties are body parameters, readOnly ones left out", action(t, pets, "create_pet"), func(t *testing.T, a connectors.Action) {
			if p := a.Parameters["name"]; p.In != "body" || !p.Required || p.Type != "string" {
				t.Errorf("name = %+v", p)
			}
			if _, ok := a.Parameters["id"]; ok {
				t.Error("readOnly id is a parameter")
			}
		}},
		{"a body property named unlike a parameter is sent by a body template", action(t, pets, "create_pet"), func(t *testing.T, a connectors.Action) {
			body, _ := json.Marshal(a.Body)
			if string(body) != `{"nick-name":"{{params.nick_name}}"}` || a.Parameters["nick_name"].In != "" {
				t.Errorf("body = %s, nick_name = %+v", body, a.Parameters["nick_name"])
			}
		}},
		{"allOf properties merge, +json bodies count as JSON", action(t, pets, "update_pet"), func(t *testing.T, a connectors.Action) {
			if a.Parameters["tags"].Type != "array" || a.Parameters["name"].In != "body" {
				t.Errorf("parameters = %+v", a.Parameters)
			}
		}},
		{"a non-object body is one parameter", action(t, pets, "replace_pets"), func(t *testing.T, a connectors.Action) {
			if p := a.Parameters["body"]; p.Type != "array" || !p.Required || a.Body != "{{params.body}}" {
				t.Errorf("body = %+v, template %v", p, a.Body)
			}
		}},
		{"path parameters from the path item; a dashed name is mapped", action(t, pets, "delete_pets_pet_id_visits"), func(t *testing.T, a connectors.Action) {
			if a.Path != "/pets/{{params.pet_id}}/visits" || !a.Parameters["pet_id"].Required || !strings.HasPrefix(a.Description, "Deprecated.") {
				t.Errorf("path = %q, parameters = %v, description %q", a.Path, a.Parameters, a.Description)
			}
		}},
		{"an optional query parameter with an unmappable name is left out", action(t, pets, "search_pets"), func(t *testing.T, a connectors.Action) {
			if len(a.Parameters) != 0 || !slices.ContainsFunc(pets.Notes, func(n string) bool { return strings.Contains(n, `"filter[name]"`) }) {
				t.Errorf("parameters = %v, notes = %v", a.Parameters, pets.Notes)
			}
		}},
		{"3.1 type lists without null", action(t, notes, "notes_create"), func(t *testing.T, a connectors.Action) {
			if p := a.Parameters["text"]; p.Type != "string" || !p.Required {
				t.Errorf("text = %+v", p)
			}
			if p := a.Parameters["color"]; !slices.Equal(p.Enum, []any{"red", "green"}) {
				t.Errorf("color = %+v", p)
			}
			if _, ok := a.Parameters["Authorization"]; ok {
				t.Error("the bearer credential's Authorization header is a parameter")
			}
		}},
		{"a body property with a path parameter's name is renamed", action(t, notes, "notes_replace"), func(t *testing.T, a connectors.Action) {
			body, _ := json.Marshal(a.Body)
			if a.Parameters["id"].In != "path" || string(body) != `{"id":"{{params.id_body}}"}` {
				t.Errorf("parameters = %+v, body %s", a.Parameters, body)
			}
		}},
		{"Swagger 2.0 body parameter becomes body parameters", action(t, tasks, "create_task"), func(t *testing.T, a connectors.Action) {
			if p := a.Parameters["priority"]; !slices.Equal(p.Enum, []any{1.0, 2.0, 3.0}) || p.Default != 2.0 || p.Type != "integer" {
				t.Errorf("priority = %+v", p)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, tc.action) })
	}
}

func TestImport_AuthSchemes(t *testing.T) {
	tests := []struct {
		name   string
		scheme string
		want   string
	}{
		{"apiKey in query", `{"type":"apiKey","in":"query","name":"key"}`, `{"type":"apiKey","name":"key","in":"query","clientSecretSet":false}`},
		{"apiKey in cookie", `{"type":"apiKey","in":"cookie","name":"sess"}`, `{"type":"apiKey","name":"sess","in":"cookie","clientSecretSet":false}`},
		{"http basic", `{"type":"http","scheme":"Basic"}`, `{"type":"basic","clientSecretSet":false}`},
		{"http digest is not mapped", `{"type":"http","scheme":"digest"}`, `{"type":"none","clientSecretSet":false}`},
		{"oauth2 client credentials", `{"type":"oauth2","flows":{"clientCredentials":{"tokenUrl":"https://x.example/token","scopes":{"b":"","a":""}}}}`,
			`{"type":"oauth2","tokenUrl":"https://x.example/token","scopes":["a","b"],"grant":"client_credentials","clientSecretSet":false}`},
		{"oauth2 implicit is not mapped", `{"type":"oauth2","flows":{"implicit":{"authorizationUrl":"https://x.example/a","scopes":{}}}}`, `{"type":"none","clientSecretSet":false}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := `{"openapi":"3.0.3","info":{"title":"x","version":"1"},"servers":[{"url":"https://x.example"}],"paths":{},
				"components":{"securitySchemes":{"s":` + tc.scheme + `}}}`
			res, err := openapiimport.Import(bg, []byte(spec), openapiimport.Options{Connector: "x"})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(res.Connector.Auth)
			if string(got) != tc.want {
				t.Errorf("auth = %s, want %s", got, tc.want)
			}
			if res.Connector.Auth.Type == "none" && len(res.Notes) == 0 {
				t.Error("an unmapped scheme without a note")
			}
		})
	}
}

func TestImport_Filters(t *testing.T) {
	all := importFixture(t, "petstore30.yaml", openapiimport.Options{})
	tests := []struct {
		name    string
		opts    openapiimport.Options
		want    []string
		skipped int
	}{
		{"by tag", openapiimport.Options{Tags: []string{"photos"}}, nil, 1},
		{"by operationId", openapiimport.Options{Operations: []string{"getPetById"}}, []string{"get_pet_by_id_2"}, 0},
		{"by action name", openapiimport.Options{Operations: []string{"create_pet"}}, []string{"create_pet"}, 0},
		{"tag or operation", openapiimport.Options{Tags: []string{"sessions"}, Operations: []string{"listPets"}}, []string{"list_pets"}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := importFixture(t, "petstore30.yaml", tc.opts)
			if !slices.Equal(names(res), tc.want) || len(res.Skipped) != tc.skipped {
				t.Errorf("actions = %v skipped = %v, want %v and %d", names(res), res.Skipped, tc.want, tc.skipped)
			}
			for _, a := range res.Actions {
				full, _ := json.Marshal(action(t, all, a.Name))
				got, _ := json.Marshal(a)
				if !bytes.Equal(full, got) {
					t.Errorf("filtered %s differs from unfiltered:\n%s\n%s", a.Name, got, full)
				}
			}
		})
	}
}

func TestImport_Errors(t *testing.T) {
	pets := fixture(t, "petstore30.yaml")
	tests := []struct {
		name string
		spec string
		opts openapiimport.Options
		kind errs.Kind
		want string
	}{
		{"empty", "", openapiimport.Options{Connector: "x"}, errs.Invalid, "spec is empty"},
		{"broken JSON says where", "{\n \"openapi\": \"3.0.0\",\n \"info\": }", openapiimport.Options{Connector: "x"}, errs.Invalid, "line 3, column 10"},
		{"not a description", `{"hello": 1}`, openapiimport.Options{Connector: "x"}, errs.Invalid, "neither an openapi nor a swagger field"},
		{"unsupported version", `{"swagger": "1.2"}`, openapiimport.Options{Connector: "x"}, errs.Invalid, "only Swagger 2.0"},
		{"unresolved reference", `{"openapi":"3.0.3","info":{"title":"x","version":"1"},"paths":{"/a":{"get":{"responses":{"200":{"$ref":"#/components/responses/Nope"}}}}}}`,
			openapiimport.Options{Connector: "x", BaseURL: "https://x.example"}, errs.Invalid, "Nope"},
		{"external reference refused", `{"openapi":"3.0.3","info":{"title":"x","version":"1"},"paths":{"/a":{"$ref":"/etc/passwd"}}}`,
			openapiimport.Options{Connector: "x", BaseURL: "https://x.example"}, errs.Invalid, "spec"},
		{"invalid connector name", string(pets), openapiimport.Options{Connector: "Bad-Name"}, errs.Validation, "invalid import"},
		{"no absolute server", `{"openapi":"3.0.3","info":{"title":"x","version":"1"},"servers":[{"url":"/v1"}],"paths":{}}`,
			openapiimport.Options{Connector: "x"}, errs.Validation, "invalid import"},
		{"unknown tag", string(pets), openapiimport.Options{Connector: "x", Tags: []string{"nope"}}, errs.Validation, "invalid import"},
		{"too many operations", string(pets), openapiimport.Options{Connector: "x", MaxActions: 2}, errs.Validation, "invalid import"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openapiimport.Import(bg, []byte(tc.spec), tc.opts)
			if errs.KindOf(err) != tc.kind || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v (%s), want %s with %q", err, errs.KindOf(err), tc.kind, tc.want)
			}
		})
	}
}

func TestImport_IsDeterministic(t *testing.T) {
	for _, f := range []string{"petstore30.yaml", "api31.json", "swagger2.json"} {
		t.Run(f, func(t *testing.T) {
			a := importFixture(t, f, openapiimport.Options{})
			b := importFixture(t, f, openapiimport.Options{})
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if !bytes.Equal(ja, jb) || !bytes.Equal(openapiimport.HCL(a), openapiimport.HCL(b)) {
				t.Error("two imports differ")
			}
		})
	}
}

func TestHCL_ParsesAndEscapes(t *testing.T) {
	spec := `{"openapi":"3.0.3","info":{"title":"Say \"${hi}\" %{x}","version":"1","description":"line\nbreak"},
		"servers":[{"url":"https://x.example"}],
		"paths":{"/a":{"post":{"operationId":"a","summary":"uses ${var.x}","requestBody":{"content":{"application/json":{"schema":{"type":"object","properties":{"we-ird":{"type":"string","enum":["${x}","%{y}"]}}}}}}}}}}`
	res, err := openapiimport.Import(bg, []byte(spec), openapiimport.Options{Connector: "x"})
	if err != nil {
		t.Fatal(err)
	}
	out := openapiimport.HCL(res)
	if _, diags := hclwrite.ParseConfig(out, "x.tf", hcl.Pos{Line: 1, Column: 1}); diags.HasErrors() {
		t.Fatalf("HCL does not parse: %v\n%s", diags, out)
	}
	for _, want := range []string{`display_name = "Say \"$${hi}\" %%{x}"`, `"$${x}", "%%{y}"`, `"we-ird" = "{{params.we_ird}}"`, `connector   = switchboard_connector.x.name`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("HCL lacks %s:\n%s", want, out)
		}
	}
}

func TestHCL_OAuth2DeclaresVariables(t *testing.T) {
	res := importFixture(t, "swagger2.json", openapiimport.Options{})
	out := string(openapiimport.HCL(res))
	for _, want := range []string{`variable "t_client_id"`, `client_id         = var.t_client_id`, `# Skipped operations:`, `POST /tasks/{taskId}/attachments (AddAttachment): the request body is multipart/form-data only`} {
		if !strings.Contains(out, want) {
			t.Errorf("HCL lacks %q:\n%s", want, out)
		}
	}
}
