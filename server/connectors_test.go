package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

type connProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// connProblems decodes details.problems of a 422.
func connProblems(t *testing.T, body []byte) []connProblem {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Details struct {
				Problems []connProblem `json:"problems"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if e.Error.Code != "validation_failed" {
		t.Fatalf("code = %q in %s, want validation_failed", e.Error.Code, body)
	}
	return e.Error.Details.Problems
}

// assertExactProblems requires the problems to name exactly the fields of
// want, each problem containing its text.
func assertExactProblems(t *testing.T, body []byte, want map[string]string) {
	t.Helper()
	got := connProblems(t, body)
	byField := map[string]string{}
	for _, p := range got {
		byField[p.Field] += p.Problem + "; "
	}
	gotFields := slices.Sorted(maps.Keys(byField))
	wantFields := slices.Sorted(maps.Keys(want))
	if !slices.Equal(gotFields, wantFields) {
		t.Errorf("problem fields = %v, want %v\nproblems: %+v", gotFields, wantFields, got)
		return
	}
	for f, text := range want {
		if !strings.Contains(byField[f], text) {
			t.Errorf("problem of %s = %q, want it to contain %q", f, byField[f], text)
		}
	}
}

// jsonClone deep-copies a JSON-shaped map.
func jsonClone(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func postJSON(t *testing.T, send func(body *bytes.Reader) (int, []byte, error), v any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	status, body, err := send(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return status, body
}

func TestConnectorValidation(t *testing.T) {
	env := servertest.New(t)
	c := rawClient(t, env)
	base := map[string]any{"name": "weather", "baseUrl": "https://api.weather.example/v1", "auth": map[string]any{"type": "none"}}
	oauth := map[string]any{"type": "oauth2", "grant": "client_credentials", "tokenUrl": "https://auth.example/token", "clientId": "id", "clientSecret": "s"}
	auth := func(a map[string]any) func(m map[string]any) { return func(m map[string]any) { m["auth"] = a } }
	withOAuth := func(change func(a map[string]any)) func(m map[string]any) {
		return func(m map[string]any) {
			a := maps.Clone(oauth)
			change(a)
			m["auth"] = a
		}
	}
	set := func(k string, v any) func(m map[string]any) { return func(m map[string]any) { m[k] = v } }
	del := func(k string) func(m map[string]any) { return func(m map[string]any) { delete(m, k) } }
	for _, tc := range []struct {
		name   string
		change func(m map[string]any)
		want   map[string]string
	}{
		{"name missing", del("name"), map[string]string{"name": "is required"}},
		{"name with upper case and dash", set("name", "My-API"), map[string]string{"name": "must match ^[a-z][a-z0-9_]{0,63}$"}},
		{"name starting with a digit", set("name", "1api"), map[string]string{"name": "must match"}},
		{"name too long", set("name", "a"+strings.Repeat("b", 64)), map[string]string{"name": "must match"}},
		{"displayName too long", set("displayName", strings.Repeat("é", 129)), map[string]string{"displayName": "at most 128 characters, got 129"}},
		{"displayName with a newline", set("displayName", "a\nb"), map[string]string{"displayName": "control characters"}},
		{"description too long", set("description", strings.Repeat("x", 4097)), map[string]string{"description": "at most 4096 characters"}},
		{"baseUrl missing", del("baseUrl"), map[string]string{"baseUrl": "is required"}},
		{"baseUrl relative", set("baseUrl", "/api"), map[string]string{"baseUrl": "absolute http:// or https://"}},
		{"baseUrl ftp", set("baseUrl", "ftp://files.example"), map[string]string{"baseUrl": "absolute http:// or https://"}},
		{"baseUrl without host", set("baseUrl", "https:///path"), map[string]string{"baseUrl": "host"}},
		{"baseUrl with query", set("baseUrl", "https://api.example/v1?key=1"), map[string]string{"baseUrl": "must not have a query"}},
		{"baseUrl with fragment", set("baseUrl", "https://api.example/v1#x"), map[string]string{"baseUrl": "fragment"}},
		{"baseUrl with credentials", set("baseUrl", "https://user:pw@api.example/v1"), map[string]string{"baseUrl": "must not contain credentials"}},
		{"baseUrl with a space", set("baseUrl", "https://api.example/a b"), map[string]string{"baseUrl": "spaces"}},
		{"baseUrl with a template", set("baseUrl", "https://api.example/{{params.x}}"), map[string]string{"baseUrl": "templates"}},
		{"baseUrl with a bad port", set("baseUrl", "https://api.example:99999/"), map[string]string{"baseUrl": "port"}},
		{"baseUrl too long", set("baseUrl", "https://api.example/"+strings.Repeat("a", 2048)), map[string]string{"baseUrl": "at most 2048 bytes"}},
		{"auth type missing beside other auth fields", auth(map[string]any{"name": "X-Key", "in": "header"}), map[string]string{"auth.type": "is required; one of none, apiKey, bearer, basic, oauth2"}},
		{"auth type unknown", auth(map[string]any{"type": "digest"}), map[string]string{"auth.type": `unknown auth type "digest"`}},
		{"apiKey without name and in", auth(map[string]any{"type": "apiKey"}), map[string]string{"auth.in": "is required for apiKey", "auth.name": "is required for apiKey"}},
		{"apiKey placement unknown", auth(map[string]any{"type": "apiKey", "name": "k", "in": "body"}), map[string]string{"auth.in": `unknown placement "body"`}},
		{"apiKey header name invalid", auth(map[string]any{"type": "apiKey", "name": "X Key", "in": "header"}), map[string]string{"auth.name": "not a valid header name"}},
		{"apiKey cookie name invalid", auth(map[string]any{"type": "apiKey", "name": "a;b", "in": "cookie"}), map[string]string{"auth.name": "not a valid cookie name"}},
		{"apiKey query name with a space", auth(map[string]any{"type": "apiKey", "name": "api key", "in": "query"}), map[string]string{"auth.name": "spaces"}},
		{"apiKey in a managed header", auth(map[string]any{"type": "apiKey", "name": "host", "in": "header"}), map[string]string{"auth.name": "Host is managed by the HTTP client"}},
		{"apiKey name too long", auth(map[string]any{"type": "apiKey", "name": strings.Repeat("k", 257), "in": "query"}), map[string]string{"auth.name": "at most 256 bytes"}},
		{"apiKey prefix with CR LF", auth(map[string]any{"type": "apiKey", "name": "k", "in": "header", "prefix": "Token\r\nX-Evil: 1"}), map[string]string{"auth.prefix": "control characters"}},
		{"apiKey fields on bearer", auth(map[string]any{"type": "bearer", "name": "k", "in": "header", "prefix": "Bearer "}), map[string]string{
			"auth.name": "applies only to auth type apiKey, not bearer", "auth.in": "applies only to auth type apiKey", "auth.prefix": "applies only to auth type apiKey"}},
		{"oauth2 fields on basic", auth(map[string]any{"type": "basic", "tokenUrl": "https://a.example", "clientId": "c", "clientSecret": "s", "scopes": []any{"a"}, "grant": "client_credentials", "authorizationUrl": "https://a.example"}), map[string]string{
			"auth.tokenUrl": "applies only to auth type oauth2", "auth.clientId": "applies only", "auth.clientSecret": "applies only", "auth.scopes": "applies only", "auth.grant": "applies only", "auth.authorizationUrl": "applies only"}},
		{"oauth2 without anything", auth(map[string]any{"type": "oauth2"}), map[string]string{"auth.grant": "is required for oauth2", "auth.tokenUrl": "is required", "auth.clientId": "is required"}},
		{"oauth2 grant unknown", withOAuth(func(a map[string]any) { a["grant"] = "password" }), map[string]string{"auth.grant": `unknown grant "password"`}},
		{"authorization_code without authorizationUrl", withOAuth(func(a map[string]any) { a["grant"] = "authorization_code" }), map[string]string{"auth.authorizationUrl": "is required"}},
		{"authorizationUrl on client_credentials", withOAuth(func(a map[string]any) { a["authorizationUrl"] = "https://a.example/auth" }), map[string]string{"auth.authorizationUrl": "applies only to grant authorization_code"}},
		{"client_credentials without secret", withOAuth(func(a map[string]any) { delete(a, "clientSecret") }), map[string]string{"auth.clientSecret": "is required for grant client_credentials"}},
		{"tokenUrl not http", withOAuth(func(a map[string]any) { a["tokenUrl"] = "javascript:alert(1)" }), map[string]string{"auth.tokenUrl": "absolute http:// or https://"}},
		{"clientId too long", withOAuth(func(a map[string]any) { a["clientId"] = strings.Repeat("c", 257) }), map[string]string{"auth.clientId": "at most 256 bytes"}},
		{"clientSecret too long", withOAuth(func(a map[string]any) { a["clientSecret"] = strings.Repeat("s", 4097) }), map[string]string{"auth.clientSecret": "at most 4096 bytes"}},
		{"scopes: empty, spaced, duplicate", withOAuth(func(a map[string]any) { a["scopes"] = []any{"read", "", "a b", "read"} }), map[string]string{
			"auth.scopes[1]": "must not be empty", "auth.scopes[2]": "must not contain spaces", "auth.scopes[3]": `duplicate scope "read"`}},
		{"too many scopes", withOAuth(func(a map[string]any) {
			var s []any
			for i := range 33 {
				s = append(s, fmt.Sprint("s", i))
			}
			a["scopes"] = s
		}), map[string]string{"auth.scopes": "at most 32 scopes, got 33"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := jsonClone(base)
			tc.change(in)
			status, body := postJSON(t, func(b *bytes.Reader) (int, []byte, error) {
				return connResult(c.CreateConnectorWithBodyWithResponse(connCtx, "application/json", b))
			}, in)
			if status != http.StatusUnprocessableEntity {
				t.Fatalf("= %d %s, want 422", status, body)
			}
			assertExactProblems(t, body, tc.want)
		})
	}
	// Nothing invalid was stored.
	res, err := env.Client(t).ListConnectorsWithResponse(connCtx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.JSON200 == nil || len(res.JSON200.Data) != 0 {
		t.Fatalf("after refused creates: %v %s", err, res.Body)
	}
}

func TestConnectorValidationListsEveryProblem(t *testing.T) {
	env := servertest.New(t)
	c := rawClient(t, env)
	status, body := postJSON(t, func(b *bytes.Reader) (int, []byte, error) {
		return connResult(c.CreateConnectorWithBodyWithResponse(connCtx, "application/json", b))
	}, map[string]any{"name": "Bad Name", "baseUrl": "ftp://x", "displayName": strings.Repeat("x", 200), "auth": map[string]any{"type": "apiKey", "in": "body"}})
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("= %d %s", status, body)
	}
	assertExactProblems(t, body, map[string]string{"name": "must match", "baseUrl": "absolute", "displayName": "at most 128", "auth.in": "unknown placement", "auth.name": "is required"})
	if !strings.Contains(string(body), `"message":"invalid connector"`) {
		t.Errorf("message: %s", body)
	}
	// Replace: a name that differs from the URL's is one more problem.
	createConnector(t, env.Client(t), weatherConnector("weather"))
	rs, err := c.ReplaceConnectorWithBodyWithResponse(connCtx, "weather", nil, "application/json", strings.NewReader(`{"name": "other", "baseUrl": "nope", "auth": {"type": "none"}}`))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "replace", rs.StatusCode(), http.StatusUnprocessableEntity, rs.Body)
	assertExactProblems(t, rs.Body, map[string]string{"name": "cannot be renamed", "baseUrl": "absolute"})
}

func TestActionValidation(t *testing.T) {
	env := servertest.New(t)
	createConnector(t, env.Client(t), weatherConnector("weather"))
	c := rawClient(t, env)
	base := map[string]any{
		"name": "forecast", "method": "POST", "path": "/forecast/{{params.city}}",
		"parameters": map[string]any{"city": map[string]any{"type": "string", "required": true}},
	}
	set := func(k string, v any) func(m map[string]any) { return func(m map[string]any) { m[k] = v } }
	del := func(k string) func(m map[string]any) { return func(m map[string]any) { delete(m, k) } }
	param := func(name string, p map[string]any) func(m map[string]any) {
		return func(m map[string]any) {
			ps := m["parameters"].(map[string]any)
			if p == nil {
				delete(ps, name)
			} else {
				ps[name] = p
			}
		}
	}
	all := func(fs ...func(m map[string]any)) func(m map[string]any) {
		return func(m map[string]any) {
			for _, f := range fs {
				f(m)
			}
		}
	}
	many := func(n int, f func(i int) (string, any)) map[string]any {
		out := map[string]any{}
		for i := range n {
			k, v := f(i)
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		change func(m map[string]any)
		want   map[string]string
	}{
		{"name missing", del("name"), map[string]string{"name": "is required"}},
		{"name invalid", set("name", "getForecast"), map[string]string{"name": "must match ^[a-z][a-z0-9_]{0,63}$"}},
		{"description too long", set("description", strings.Repeat("d", 4097)), map[string]string{"description": "at most 4096 characters"}},
		{"method missing", del("method"), map[string]string{"method": "is required; one of GET, POST"}},
		{"method unknown", set("method", "FETCH"), map[string]string{"method": `unknown method "FETCH"`}},
		{"method lower case", set("method", "post"), map[string]string{"method": "methods are upper case: POST"}},
		{"path missing", all(del("path"), param("city", nil)), map[string]string{"path": "is required"}},
		{"path without leading slash", set("path", "forecast/{{params.city}}"), map[string]string{"path": "must start with /"}},
		{"path with a query", set("path", "/forecast/{{params.city}}?units=metric"), map[string]string{"path": "no query or fragment; declare query parameters with in: query"}},
		{"path with a fragment", set("path", "/forecast/{{params.city}}#top"), map[string]string{"path": "no query or fragment"}},
		{"path with a space", set("path", "/fore cast/{{params.city}}"), map[string]string{"path": "' ' at offset 5 is not allowed in a path"}},
		{"path with a bad percent-escape", set("path", "/a%zz/{{params.city}}"), map[string]string{"path": "invalid percent-escape at offset 2"}},
		{"path with a dot segment", set("path", "/a/../{{params.city}}"), map[string]string{"path": ". or .. segments"}},
		{"path template unclosed", set("path", "/forecast/{{params.city"), map[string]string{"path": "template error at offset 10: unclosed {{"}},
		{"path template unknown root", set("path", "/forecast/{{env.city}}"), map[string]string{"path": `offset 12: unknown root "env"`}},
		{"path template invalid identifier", set("path", "/forecast/{{params.9city}}"), map[string]string{"path": `invalid parameter name "9city"`}},
		{"path names an undeclared parameter", set("path", "/forecast/{{params.city}}/{{params.day}}"), map[string]string{"path": `{{params.day}} names an undeclared parameter`}},
		{"path too long", set("path", "/"+strings.Repeat("a", 4096)+"/{{params.city}}"), map[string]string{"path": "exceeds the template size limit of 4096 bytes"}},
		{"path parameter not required", param("city", map[string]any{"type": "string"}), map[string]string{"parameters.city.required": "must be true: the path template uses {{params.city}}"}},
		{"path parameter placed elsewhere", param("city", map[string]any{"type": "string", "required": true, "in": "query"}), map[string]string{"parameters.city.in": `is "query", but the path template uses`}},
		{"path parameter of type object", param("city", map[string]any{"type": "object", "required": true}), map[string]string{"parameters.city.type": "path parameters must be string, number, integer or boolean"}},
		{"in path but not in the path", param("day", map[string]any{"type": "string", "in": "path"}), map[string]string{"parameters.day.in": "is path, but the path template does not use {{params.day}}"}},
		{"parameter name invalid", param("bad-name", map[string]any{"type": "string"}), map[string]string{"parameters.bad-name": `parameter name "bad-name" must match ^[A-Za-z_][A-Za-z0-9_]{0,63}$`}},
		{"parameter name with a space", param("a b", map[string]any{"type": "string"}), map[string]string{`parameters["a b"]`: "must match"}},
		{"parameter type missing", param("day", map[string]any{}), map[string]string{"parameters.day.type": "is required; one of string, number, integer, boolean, array, object"}},
		{"parameter type unknown", param("day", map[string]any{"type": "date"}), map[string]string{"parameters.day.type": `unknown type "date"`}},
		{"parameter placement unknown", param("day", map[string]any{"type": "string", "in": "cookie"}), map[string]string{"parameters.day.in": `unknown placement "cookie"`}},
		{"parameter description too long", param("day", map[string]any{"type": "string", "description": strings.Repeat("x", 4097)}), map[string]string{"parameters.day.description": "at most 4096 characters"}},
		{"enum of the wrong type", param("day", map[string]any{"type": "integer", "enum": []any{1, "two", 3.5}}), map[string]string{"parameters.day.enum[1]": "must be of type integer, got a string", "parameters.day.enum[2]": "must be an integer"}},
		{"enum with duplicates", param("units", map[string]any{"type": "string", "enum": []any{"metric", "imperial", "metric"}}), map[string]string{"parameters.units.enum[2]": "duplicates enum[0]"}},
		{"enum too long", param("n", map[string]any{"type": "number", "enum": func() []any {
			var e []any
			for i := range 101 {
				e = append(e, i)
			}
			return e
		}()}), map[string]string{"parameters.n.enum": "at most 100 values, got 101"}},
		{"default of the wrong type", param("days", map[string]any{"type": "integer", "default": "3"}), map[string]string{"parameters.days.default": "must be of type integer, got a string"}},
		{"default not an integer", param("days", map[string]any{"type": "integer", "default": 1.5}), map[string]string{"parameters.days.default": "must be an integer"}},
		{"default outside the enum", param("units", map[string]any{"type": "string", "enum": []any{"metric"}, "default": "kelvin"}), map[string]string{"parameters.units.default": "not one of the enum values"}},
		{"default on a required parameter", param("units", map[string]any{"type": "string", "required": true, "default": "metric"}), map[string]string{"parameters.units.default": "a required parameter never uses its default"}},
		{"boolean default for an object", param("filter", map[string]any{"type": "object", "default": true}), map[string]string{"parameters.filter.default": "must be of type object, got a boolean"}},
		{"body parameter on GET", all(set("method", "GET"), param("q", map[string]any{"type": "string", "in": "body"})), map[string]string{"parameters.q.in": "is body, but GET requests carry no body"}},
		{"body parameter with an array body", all(set("body", []any{"x"}), param("q", map[string]any{"type": "string", "in": "body"})), map[string]string{"parameters.q.in": "the body template is not a JSON object"}},
		{"too many parameters", set("parameters", many(65, func(i int) (string, any) {
			if i == 0 {
				return "city", map[string]any{"type": "string", "required": true}
			}
			return fmt.Sprintf("p%d", i), map[string]any{"type": "string"}
		})), map[string]string{"parameters": "at most 64 parameters, got 65"}},
		{"header name invalid", set("headers", map[string]any{"X Units": "metric"}), map[string]string{`headers["X Units"]`: "not a valid header name"}},
		{"header managed by the client", set("headers", map[string]any{"content-length": "1", "Host": "evil.example"}), map[string]string{"headers.content-length": "Content-Length is managed", "headers.Host": "Host is managed"}},
		{"header duplicated across case", set("headers", map[string]any{"X-Units": "a", "x-units": "b"}), map[string]string{"headers.x-units": "duplicates header"}},
		{"header value with CR LF", set("headers", map[string]any{"X-A": "a\r\nX-Injected: 1"}), map[string]string{"headers.X-A": "must not contain CR, LF or NUL"}},
		{"header template names an undeclared parameter", set("headers", map[string]any{"X-Units": "{{params.units}}"}), map[string]string{"headers.X-Units": "{{params.units}} names an undeclared parameter"}},
		{"header template syntax", set("headers", map[string]any{"X-Units": "{{ params.units"}), map[string]string{"headers.X-Units": "template error at offset 0: unclosed {{"}},
		{"header value too long", set("headers", map[string]any{"X-Long": strings.Repeat("v", 4097)}), map[string]string{"headers.X-Long": "exceeds the template size limit of 4096 bytes"}},
		{"too many headers", set("headers", many(33, func(i int) (string, any) { return fmt.Sprintf("X-H%d", i), "v" })), map[string]string{"headers": "at most 32 headers, got 33"}},
		{"body on GET", all(set("method", "GET"), set("body", map[string]any{"a": 1})), map[string]string{"body": "GET requests carry no body"}},
		{"body names an undeclared parameter", set("body", map[string]any{"q": map[string]any{"text": "{{params.q}}"}}), map[string]string{"body.q.text": "{{params.q}} names an undeclared parameter"}},
		{"body template syntax", set("body", map[string]any{"items": []any{"ok", "{{params}}"}}), map[string]string{"body.items[1]": "expected . and a parameter name"}},
		{"body too large", set("body", map[string]any{"x": strings.Repeat("b", 65536)}), map[string]string{"body": "exceeds the body template size limit of 65536 bytes"}},
		{"transformation does not compile", set("transformation", "const t = data.temp;\nreturn t +* 2;"), map[string]string{"transformation": "does not compile: line 2, column 11"}},
		{"transformation escapes its function", set("transformation", "return 1;\n}); (function() {"), map[string]string{"transformation": "closes the function body early"}},
		{"transformation too large", set("transformation", "return 1;"+strings.Repeat(" ", 65536)), map[string]string{"transformation": "exceeds the script size limit of 65536 bytes"}},
		{"timeout zero", set("timeoutMs", 0), map[string]string{"timeoutMs": "must be positive"}},
		{"timeout negative", set("timeoutMs", -5), map[string]string{"timeoutMs": "must be positive"}},
		{"timeout over the server's maximum", set("timeoutMs", 120001), map[string]string{"timeoutMs": "at most 120000 (the server's connectors.maxTimeout)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := jsonClone(base)
			tc.change(in)
			status, body := postJSON(t, func(b *bytes.Reader) (int, []byte, error) {
				return connResult(c.CreateActionWithBodyWithResponse(connCtx, "weather", "application/json", b))
			}, in)
			if status != http.StatusUnprocessableEntity {
				t.Fatalf("= %d %s, want 422", status, body)
			}
			assertExactProblems(t, body, tc.want)
		})
	}
	res, err := env.Client(t).ListActionsWithResponse(connCtx, "weather", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.JSON200 == nil || len(res.JSON200.Data) != 0 {
		t.Fatalf("after refused creates: %v %s", err, res.Body)
	}
}

// TestActionValidationAccepts guards against over-eager validation: each
// of these is a sensible action and must be saved.
func TestActionValidationAccepts(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	createConnector(t, c, weatherConnector("weather"))
	for i, raw := range []string{
		`{"method": "GET", "path": "/"}`,
		`{"method": "GET", "path": "/search", "parameters": {"q": {"type": "string", "required": true}, "pageSize": {"type": "integer", "default": 20, "enum": [10, 20, 50]}, "tags": {"type": "array", "in": "query"}}}`,
		`{"method": "GET", "path": "/items/{{params.id}}.json", "parameters": {"id": {"type": "integer", "required": true, "in": "path"}}}`,
		`{"method": "GET", "path": "/a/{{params.x}}{{params.y}}/b%20c/~user/@me/x:y;z=1,2", "parameters": {"x": {"type": "string", "required": true}, "y": {"type": "boolean", "required": true}}}`,
		`{"method": "POST", "path": "/v1/messages", "headers": {"X-Trace": "t-{{ params.trace }}", "Content-Type": "application/json"}, "body": {"text": "{{params.text}}", "n": "{{params.n}}", "fixed": [1, true, null, {"k": "v }} {"}]}, "parameters": {"trace": {"type": "string"}, "text": {"type": "string", "required": true}, "n": {"type": "number", "default": 1.5}}}`,
		`{"method": "PUT", "path": "/x", "parameters": {"obj": {"type": "object", "in": "body", "default": {"a": [1]}}, "flag": {"type": "boolean", "in": "header", "default": false}}}`,
		`{"method": "DELETE", "path": "/x/{{params.id}}", "parameters": {"id": {"type": "string", "required": true, "enum": ["a", "b"]}}, "timeoutMs": 120000}`,
		`{"method": "PATCH", "path": "/x", "body": "{{params.raw}}", "parameters": {"raw": {"type": "object", "required": true}}}`,
		`{"method": "GET", "path": "/x", "transformation": "// keep only names\nconst names = (data.items || []).map(i => i.name);\nreturn {names, status: response.status};"}`,
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var in map[string]any
			if err := json.Unmarshal([]byte(raw), &in); err != nil {
				t.Fatal(err)
			}
			in["name"] = fmt.Sprintf("action_%d", i)
			b, _ := json.Marshal(in)
			res, err := c.CreateActionWithBodyWithResponse(connCtx, "weather", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			wantStatus(t, raw, res.StatusCode(), http.StatusCreated, res.Body)
			// What was saved is what was sent.
			var got map[string]any
			if err := json.Unmarshal(res.Body, &got); err != nil {
				t.Fatal(err)
			}
			for k, v := range in {
				if k == "parameters" {
					continue
				}
				if gb, wb := jsonString(got[k]), jsonString(v); gb != wb {
					t.Errorf("%s = %s, sent %s", k, gb, wb)
				}
			}
		})
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestConnectorClientSecretWriteOnly follows an OAuth client secret through
// every operation: accepted and sealed, never in a response, a list, an
// error, a log line or the database in plaintext.
func TestConnectorClientSecretWriteOnly(t *testing.T) {
	const secret = "cs_9f8e7d6c5b4a39281706f5e4d3c2b1a0"
	const rotated = "cs_rotated_0a1b2c3d4e5f60718293a4b5c6"
	var logs syncBuf
	env := servertest.NewWithLogger(t, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	c := env.Client(t)
	var bodies [][]byte
	keep := func(b []byte) { bodies = append(bodies, b) }

	grant := client.ConnectorGrantClientCredentials
	in := client.ConnectorInput{
		Name: connStr("crm"), BaseUrl: "https://crm.example/api",
		Auth: client.ConnectorAuth{Type: client.ConnectorAuthOAuth2, Grant: &grant, TokenUrl: connStr("https://crm.example/oauth/token"),
			ClientId: connStr("client-1"), ClientSecret: connStr(secret), Scopes: &[]string{"contacts.read"}},
	}
	res, err := c.CreateConnectorWithResponse(connCtx, in)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "create", res.StatusCode(), http.StatusCreated, res.Body)
	keep(res.Body)
	if res.JSON201.Auth.ClientSecret != nil || res.JSON201.Auth.ClientSecretSet == nil || !*res.JSON201.Auth.ClientSecretSet {
		t.Errorf("created auth = %s", res.Body)
	}
	storedSecret := func() string {
		var s string
		if err := env.Store.View(connCtx, func(tx store.Tx) error {
			var err error
			s, err = env.Server.Connectors().ClientSecret(tx, "crm")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := storedSecret(); got != secret {
		t.Fatalf("sealed secret opens to %q", got)
	}

	g, err := c.GetConnectorWithResponse(connCtx, "crm")
	if err != nil {
		t.Fatal(err)
	}
	keep(g.Body)
	l, err := c.ListConnectorsWithResponse(connCtx, nil)
	if err != nil {
		t.Fatal(err)
	}
	keep(l.Body)
	// A refused write that carries the secret does not echo it.
	bad := in
	bad.BaseUrl = "not a url"
	br, err := c.ReplaceConnectorWithResponse(connCtx, "crm", nil, bad)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "invalid replace", br.StatusCode(), http.StatusUnprocessableEntity, br.Body)
	keep(br.Body)
	dup, err := c.CreateConnectorWithResponse(connCtx, in)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "duplicate create", dup.StatusCode(), http.StatusConflict, dup.Body)
	keep(dup.Body)

	// Replace without the secret keeps it.
	noSecret := in
	noSecret.Auth.ClientSecret = nil
	noSecret.Description = connStr("CRM")
	r1, err := c.ReplaceConnectorWithResponse(connCtx, "crm", nil, noSecret)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "replace without secret", r1.StatusCode(), http.StatusOK, r1.Body)
	keep(r1.Body)
	if !*r1.JSON200.Auth.ClientSecretSet || storedSecret() != secret {
		t.Errorf("replace without a secret lost it: %s", r1.Body)
	}
	// Replace with a new one rotates it.
	withRotated := in
	withRotated.Auth.ClientSecret = connStr(rotated)
	r2, err := c.ReplaceConnectorWithResponse(connCtx, "crm", nil, withRotated)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "replace with secret", r2.StatusCode(), http.StatusOK, r2.Body)
	keep(r2.Body)
	if storedSecret() != rotated {
		t.Error("the secret was not rotated")
	}

	// The events of these changes (GET /v1/events) carry the connector as
	// the API shows it, without the secret.
	ev, err := c.ListEventsWithResponse(connCtx, &client.ListEventsParams{Limit: ptrTo(100)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "list events", ev.StatusCode(), http.StatusOK, ev.Body)
	types := map[string]int{}
	for _, e := range ev.JSON200.Data {
		types[e.Type]++
	}
	if types["connector.created"] != 1 || types["connector.updated"] != 2 {
		t.Errorf("events = %v, want 1 connector.created and 2 connector.updated", types)
	}
	if !bytes.Contains(ev.Body, []byte(`"clientSecretSet":true`)) {
		t.Errorf("connector events do not show clientSecretSet: %s", ev.Body)
	}
	keep(ev.Body)

	for _, b := range bodies {
		for _, s := range []string{secret, rotated} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("response holds the client secret: %s", b)
			}
		}
		if bytes.Contains(b, []byte(`"clientSecret"`)) {
			t.Errorf("response has a clientSecret field: %s", b)
		}
	}
	for _, s := range []string{secret, rotated} {
		if strings.Contains(logs.String(), s) {
			t.Error("a log line holds the client secret")
		}
	}
	// Sealed at rest: no bucket holds it in plaintext.
	if err := env.Store.View(connCtx, func(tx store.Tx) error {
		for _, b := range store.Buckets {
			if err := tx.Scan(b, "", "", func(k string, v []byte) (bool, error) {
				for _, s := range []string{secret, rotated} {
					if bytes.Contains(v, []byte(s)) || strings.Contains(k, s) {
						t.Errorf("bucket %s key %s holds the secret in plaintext", b, k)
					}
				}
				return true, nil
			}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Switching to another auth type deletes the secret.
	r3, err := c.ReplaceConnectorWithResponse(connCtx, "crm", nil, client.ConnectorInput{BaseUrl: "https://crm.example/api", Auth: client.ConnectorAuth{Type: client.ConnectorAuthBearer}})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "replace with bearer", r3.StatusCode(), http.StatusOK, r3.Body)
	if *r3.JSON200.Auth.ClientSecretSet || storedSecret() != "" {
		t.Errorf("secret kept after switching to bearer: %s", r3.Body)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDeleteConnectorRemovesActionsAndSecrets(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	grant := client.ConnectorGrantClientCredentials
	createConnector(t, c, client.ConnectorInput{
		Name: connStr("crm"), BaseUrl: "https://crm.example",
		Auth: client.ConnectorAuth{Type: client.ConnectorAuthOAuth2, Grant: &grant, TokenUrl: connStr("https://crm.example/token"), ClientId: connStr("id"), ClientSecret: connStr("secret-value")},
	})
	createConnector(t, c, weatherConnector("crm_2")) // shares the prefix "crm"
	for _, n := range []string{"one", "two", "three"} {
		createAction(t, c, "crm", client.ActionInput{Name: connStr(n), Method: client.ActionMethodGET, Path: "/" + n})
	}
	createAction(t, c, "crm_2", client.ActionInput{Name: connStr("one"), Method: client.ActionMethodGET, Path: "/one"})
	// Another domain's secret under the connector's prefix goes too.
	if err := env.Store.Update(connCtx, func(tx store.Tx) error {
		return env.Vault.Put(tx, connectors.SecretPrefix("crm")+"connections/default", []byte("api-key"))
	}); err != nil {
		t.Fatal(err)
	}

	del, err := c.DeleteConnectorWithResponse(connCtx, "crm", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "delete", del.StatusCode(), http.StatusNoContent, del.Body)

	la, err := c.ListActionsWithResponse(connCtx, "crm", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "list actions of a deleted connector", la.StatusCode(), http.StatusNotFound, la.Body)
	ga, err := c.GetActionWithResponse(connCtx, "crm", "one")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "get action of a deleted connector", ga.StatusCode(), http.StatusNotFound, ga.Body)

	// Nothing of crm is left in the store; crm_2 is untouched.
	var leftovers []string
	if err := env.Store.View(connCtx, func(tx store.Tx) error {
		for _, b := range []string{connectors.BucketConnectors, connectors.BucketActions, "secrets"} {
			if err := tx.Scan(b, "", "", func(k string, _ []byte) (bool, error) {
				leftovers = append(leftovers, b+":"+k)
				return true, nil
			}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(leftovers)
	var mine []string
	for _, k := range leftovers {
		if strings.Contains(k, "crm") && !strings.Contains(k, "crm_2") {
			mine = append(mine, k)
		}
	}
	if len(mine) > 0 {
		t.Errorf("left after deleting crm: %v", mine)
	}
	if !slices.Contains(leftovers, "connectors:crm_2") || !slices.Contains(leftovers, "actions:crm_2/one") {
		t.Errorf("crm_2 was touched: %v", leftovers)
	}

	// Recreated under the same name: a fresh connector without the old actions.
	again := createConnector(t, c, weatherConnector("crm"))
	if again.Version != 1 || *again.Auth.ClientSecretSet {
		t.Errorf("recreated = %+v", again)
	}
	la, err = c.ListActionsWithResponse(connCtx, "crm", nil)
	if err != nil {
		t.Fatal(err)
	}
	if la.StatusCode() != http.StatusOK || len(la.JSON200.Data) != 0 {
		t.Errorf("actions of the recreated connector = %s", la.Body)
	}
}

// TestConcurrentCreates: of many simultaneous creates of one name, exactly
// one wins and the others get 409.
func TestConcurrentCreates(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	const n = 16
	count := func(create func(i int) (int, error)) map[int]int {
		statuses := make([]int, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				s, err := create(i)
				if err != nil {
					t.Error(err)
				}
				statuses[i] = s
			})
		}
		close(start)
		wg.Wait()
		out := map[int]int{}
		for _, s := range statuses {
			out[s]++
		}
		return out
	}
	got := count(func(i int) (int, error) {
		in := weatherConnector("race")
		in.Description = connStr(fmt.Sprint("writer ", i))
		return connStatus(c.CreateConnectorWithResponse(connCtx, in))
	})
	if got[http.StatusCreated] != 1 || got[http.StatusConflict] != n-1 {
		t.Errorf("connector creates: %v, want 1×201 and %d×409", got, n-1)
	}
	got = count(func(i int) (int, error) {
		return connStatus(c.CreateActionWithResponse(connCtx, "race", forecastAction("act")))
	})
	if got[http.StatusCreated] != 1 || got[http.StatusConflict] != n-1 {
		t.Errorf("action creates: %v, want 1×201 and %d×409", got, n-1)
	}
	// Concurrent replaces with the same If-Match: exactly one applies.
	got = count(func(i int) (int, error) {
		return connStatus(c.ReplaceConnectorWithResponse(connCtx, "race", &client.ReplaceConnectorParams{IfMatch: connStr(`"1"`)}, weatherConnector("race")))
	})
	if got[http.StatusOK] != 1 || got[http.StatusPreconditionFailed] != n-1 {
		t.Errorf("replaces with If-Match: %v, want 1×200 and %d×412", got, n-1)
	}
}
