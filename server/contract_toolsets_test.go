package server_test

import (
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

var tsCtx = context.Background()

// createToolset creates a toolset and fails the test unless it is 201.
func createToolset(t *testing.T, c *client.ClientWithResponses, name string, tools ...string) *client.Toolset {
	t.Helper()
	res, err := c.CreateToolsetWithResponse(tsCtx, client.ToolsetInput{Name: &name, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "create toolset "+name, res.StatusCode(), http.StatusCreated, res.Body)
	return res.JSON201
}

// toolsetEvents returns the data of the events of type typ, oldest first.
func toolsetEvents(t *testing.T, c *client.ClientWithResponses, typ client.EventType) []map[string]any {
	t.Helper()
	order := client.EventOrderOldest
	res, err := c.ListEventsWithResponse(tsCtx, &client.ListEventsParams{Type: &typ, Order: &order, Limit: ptr(100)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "list events "+string(typ), res.StatusCode(), http.StatusOK, res.Body)
	var out []map[string]any
	for _, e := range res.JSON200.Data {
		out = append(out, e.Data)
	}
	return out
}

// TestContractToolsetLifecycle: create, read, list, replace, delete, each
// recording its event; afterwards every operation on the name is 404.
func TestContractToolsetLifecycle(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)

	desc := "Support agent tools"
	res, err := c.CreateToolsetWithResponse(tsCtx, client.ToolsetInput{
		Name: ptr("support"), Description: &desc, Tools: []string{"weather.forecast", "crm.*", "zendesk"},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "create", res.StatusCode(), http.StatusCreated, res.Body)
	created := res.JSON201
	if got := res.HTTPResponse.Header.Get("ETag"); got != `"1"` {
		t.Errorf("ETag = %q, want \"1\"", got)
	}
	if got := res.HTTPResponse.Header.Get("Location"); got != "/v1/toolsets/support" {
		t.Errorf("Location = %q", got)
	}
	if created.Name != "support" || created.Version != 1 || created.Description == nil || *created.Description != desc ||
		!slices.Equal(created.Tools, []string{"weather.forecast", "crm.*", "zendesk"}) ||
		!created.CreatedAt.Equal(created.UpdatedAt) || time.Since(created.CreatedAt) > time.Minute || created.CreatedAt.Location() != time.UTC {
		t.Errorf("created = %s", res.Body)
	}

	got, err := c.GetToolsetWithResponse(tsCtx, "support")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "get", got.StatusCode(), http.StatusOK, got.Body)
	if !reflect.DeepEqual(got.JSON200, created) || got.HTTPResponse.Header.Get("ETag") != `"1"` {
		t.Errorf("get = %s (ETag %q), want what create returned", got.Body, got.HTTPResponse.Header.Get("ETag"))
	}

	// Replace: name may be left out, a description left out is removed.
	rep, err := c.ReplaceToolsetWithResponse(tsCtx, "support", nil, client.ToolsetInput{Tools: []string{"crm.create_contact"}})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "replace", rep.StatusCode(), http.StatusOK, rep.Body)
	r := rep.JSON200
	if r.Version != 2 || r.Description != nil || !slices.Equal(r.Tools, []string{"crm.create_contact"}) ||
		!r.CreatedAt.Equal(created.CreatedAt) || r.UpdatedAt.Before(created.UpdatedAt) || rep.HTTPResponse.Header.Get("ETag") != `"2"` {
		t.Errorf("replaced = %s (ETag %q)", rep.Body, rep.HTTPResponse.Header.Get("ETag"))
	}
	// The body may repeat the URL's name.
	rep, err = c.ReplaceToolsetWithResponse(tsCtx, "support", nil, client.ToolsetInput{Name: ptr("support"), Tools: r.Tools})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "replace naming itself", rep.StatusCode(), http.StatusOK, rep.Body)
	r = rep.JSON200

	list, err := c.ListToolsetsWithResponse(tsCtx, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "list", list.StatusCode(), http.StatusOK, list.Body)
	if len(list.JSON200.Data) != 1 || !reflect.DeepEqual(list.JSON200.Data[0], *r) || list.JSON200.NextCursor != nil {
		t.Errorf("list = %s", list.Body)
	}

	del, err := c.DeleteToolsetWithResponse(tsCtx, "support", nil)
	if err != nil {
		t.Fatal(err)
	}
	if del.StatusCode() != http.StatusNoContent || len(del.Body) != 0 {
		t.Fatalf("delete = %d %s, want 204 without body", del.StatusCode(), del.Body)
	}
	for _, tc := range []struct {
		name string
		call func() (int, []byte, error)
	}{
		{"get", func() (int, []byte, error) { return connResult(c.GetToolsetWithResponse(tsCtx, "support")) }},
		{"replace", func() (int, []byte, error) {
			return connResult(c.ReplaceToolsetWithResponse(tsCtx, "support", nil, client.ToolsetInput{Tools: []string{"crm"}}))
		}},
		{"delete", func() (int, []byte, error) { return connResult(c.DeleteToolsetWithResponse(tsCtx, "support", nil)) }},
	} {
		t.Run(tc.name+" after delete", func(t *testing.T) {
			status, body, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			if status != http.StatusNotFound || errorCode(t, body) != "not_found" || !strings.Contains(string(body), `toolset \"support\" not found`) {
				t.Errorf("= %d %s, want 404 naming the toolset", status, body)
			}
		})
	}

	// Each change recorded its event, with the toolset as the API shows it.
	for _, tc := range []struct {
		typ      client.EventType
		versions []float64
	}{
		{client.EventTypeToolsetCreated, []float64{1}},
		{client.EventTypeToolsetUpdated, []float64{2, 3}},
		{client.EventTypeToolsetDeleted, []float64{3}},
	} {
		t.Run(string(tc.typ), func(t *testing.T) {
			data := toolsetEvents(t, c, tc.typ)
			var versions []float64
			for _, d := range data {
				if d["name"] != "support" || d["tools"] == nil || d["createdAt"] == nil {
					t.Errorf("event data = %v", d)
				}
				v, _ := d["version"].(float64)
				versions = append(versions, v)
			}
			if !slices.Equal(versions, tc.versions) {
				t.Errorf("versions of %s events = %v, want %v", tc.typ, versions, tc.versions)
			}
		})
	}
	if d := toolsetEvents(t, c, client.EventTypeToolsetCreated); len(d) == 1 && d[0]["description"] != desc {
		t.Errorf("toolset.created data = %v, want the description", d[0])
	}
}

// TestContractToolsetValidation: invalid toolsets are 422 listing each
// problem by its JSON path; nothing is stored.
func TestContractToolsetValidation(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	createToolset(t, c, "support", "crm.*")
	// Outside the spec (patterns, sizes): the client would not send them.
	raw := rawClient(t, env)
	many := make([]string, 257)
	for i := range many {
		many[i] = "c" + strings.Repeat("x", i%60) + ".a"
	}
	for _, tc := range []struct {
		name   string
		in     client.ToolsetInput
		fields []string
		says   string
	}{
		{"name missing", client.ToolsetInput{Tools: []string{"crm"}}, []string{"name"}, "must match"},
		{"name with upper case", client.ToolsetInput{Name: ptr("Support"), Tools: []string{"crm"}}, []string{"name"}, "must match"},
		{"name with a dash", client.ToolsetInput{Name: ptr("my-tools"), Tools: []string{"crm"}}, []string{"name"}, "must match"},
		{"no tools", client.ToolsetInput{Name: ptr("x"), Tools: []string{}}, []string{"tools"}, "at least one"},
		{"tools absent", client.ToolsetInput{Name: ptr("x")}, []string{"tools"}, "at least one"},
		{"bad second entry", client.ToolsetInput{Name: ptr("x"), Tools: []string{"crm.*", "crm/contacts"}}, []string{"tools[1]"}, "connector.action"},
		{"wildcard action part", client.ToolsetInput{Name: ptr("x"), Tools: []string{"crm.create_*"}}, []string{"tools[0]"}, "connector.*"},
		{"three parts", client.ToolsetInput{Name: ptr("x"), Tools: []string{"a.b.c"}}, []string{"tools[0]"}, "connector.action"},
		{"empty entry", client.ToolsetInput{Name: ptr("x"), Tools: []string{""}}, []string{"tools[0]"}, "connector.action"},
		{"duplicate entry", client.ToolsetInput{Name: ptr("x"), Tools: []string{"crm", "weather.forecast", "crm"}}, []string{"tools[2]"}, "twice"},
		{"too many entries", client.ToolsetInput{Name: ptr("x"), Tools: many}, []string{"tools"}, "limit is 256"},
		{"description too long", client.ToolsetInput{Name: ptr("x"), Description: ptr(strings.Repeat("d", 4097)), Tools: []string{"crm"}}, []string{"description"}, "limit is 4096"},
		{"control character in description", client.ToolsetInput{Name: ptr("x"), Description: ptr("a\x07b"), Tools: []string{"crm"}}, []string{"description"}, "control"},
		{"every problem at once", client.ToolsetInput{Name: ptr("X"), Tools: []string{"ok", "no way"}}, []string{"name", "tools[1]"}, "invalid toolset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := raw.CreateToolsetWithResponse(tsCtx, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			wantStatus(t, "create", res.StatusCode(), http.StatusUnprocessableEntity, res.Body)
			if errorCode(t, res.Body) != "validation_failed" || !strings.Contains(string(res.Body), tc.says) {
				t.Errorf("= %s, want validation_failed saying %q", res.Body, tc.says)
			}
			assertProblems(t, res.Body, tc.fields...)
		})
	}
	for _, tc := range []struct {
		name   string
		in     client.ToolsetInput
		fields []string
	}{
		{"renamed", client.ToolsetInput{Name: ptr("other"), Tools: []string{"crm"}}, []string{"name"}},
		{"bad entry", client.ToolsetInput{Tools: []string{"crm", "crm.", "crm"}}, []string{"tools[1]", "tools[2]"}},
		{"no tools", client.ToolsetInput{Tools: nil}, []string{"tools"}},
	} {
		t.Run("replace "+tc.name, func(t *testing.T) {
			res, err := raw.ReplaceToolsetWithResponse(tsCtx, "support", nil, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			wantStatus(t, "replace", res.StatusCode(), http.StatusUnprocessableEntity, res.Body)
			assertProblems(t, res.Body, tc.fields...)
		})
	}

	// Nothing invalid was stored or changed.
	list, err := c.ListToolsetsWithResponse(tsCtx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.JSON200.Data) != 1 || list.JSON200.Data[0].Version != 1 || !slices.Equal(list.JSON200.Data[0].Tools, []string{"crm.*"}) {
		t.Errorf("after refused writes: %s", list.Body)
	}
}

func TestContractToolsetConflict(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	createToolset(t, c, "support", "crm.*")
	res, err := c.CreateToolsetWithResponse(tsCtx, client.ToolsetInput{Name: ptr("support"), Tools: []string{"weather"}})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "second create", res.StatusCode(), http.StatusConflict, res.Body)
	if errorCode(t, res.Body) != "conflict" || !strings.Contains(string(res.Body), "PUT /v1/toolsets/support") {
		t.Errorf("409 = %s, want conflict saying how to replace it", res.Body)
	}
	got, err := c.GetToolsetWithResponse(tsCtx, "support")
	if err != nil {
		t.Fatal(err)
	}
	if got.JSON200 == nil || !slices.Equal(got.JSON200.Tools, []string{"crm.*"}) {
		t.Errorf("the first toolset changed: %s", got.Body)
	}
}

func TestContractToolsetIfMatch(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	createToolset(t, c, "support", "crm.*")
	in := client.ToolsetInput{Tools: []string{"crm.*", "weather"}}

	for _, tc := range []struct {
		name, header string
		want         int
	}{
		{"stale version", `"7"`, http.StatusPreconditionFailed},
		{"weak tag never matches", `W/"1"`, http.StatusPreconditionFailed},
		{"current version", `"1"`, http.StatusOK},
		{"bare number", `2`, http.StatusOK},
		{"any", `*`, http.StatusOK},
		{"list with the current version", `"1", "4", "9"`, http.StatusOK},
		{"list without it", `"1", "2"`, http.StatusPreconditionFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.ReplaceToolsetWithResponse(tsCtx, "support", &client.ReplaceToolsetParams{IfMatch: &tc.header}, in)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode() != tc.want {
				t.Fatalf("If-Match %s = %d %s, want %d", tc.header, res.StatusCode(), res.Body, tc.want)
			}
			if tc.want == http.StatusPreconditionFailed && errorCode(t, res.Body) != "precondition_failed" {
				t.Errorf("412 code = %s", res.Body)
			}
		})
	}
	// Precondition is checked before validation (RFC 9110 §13.2.2).
	res, err := rawClient(t, env).ReplaceToolsetWithResponse(tsCtx, "support", &client.ReplaceToolsetParams{IfMatch: ptr(`"1"`)}, client.ToolsetInput{Tools: []string{"bad entry"}})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "stale and invalid replace", res.StatusCode(), http.StatusPreconditionFailed, res.Body)

	// Four replaces succeeded: version 5. A stale If-Match on DELETE keeps it.
	del, err := c.DeleteToolsetWithResponse(tsCtx, "support", &client.DeleteToolsetParams{IfMatch: ptr(`"4"`)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "stale delete", del.StatusCode(), http.StatusPreconditionFailed, del.Body)
	if !strings.Contains(string(del.Body), "version 5") {
		t.Errorf("412 does not say the current version: %s", del.Body)
	}
	del, err = c.DeleteToolsetWithResponse(tsCtx, "support", &client.DeleteToolsetParams{IfMatch: ptr(`"5"`)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "current delete", del.StatusCode(), http.StatusNoContent, del.Body)
}

func TestContractToolsetPaging(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	for _, name := range []string{"gamma", "alpha", "beta"} {
		createToolset(t, c, name, "crm")
	}
	var got []string
	var cursor *string
	for range 3 {
		res, err := c.ListToolsetsWithResponse(tsCtx, &client.ListToolsetsParams{Limit: ptr(2), Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, "list", res.StatusCode(), http.StatusOK, res.Body)
		for _, ts := range res.JSON200.Data {
			got = append(got, ts.Name)
		}
		if cursor = res.JSON200.NextCursor; cursor == nil {
			break
		}
	}
	if want := []string{"alpha", "beta", "gamma"}; !slices.Equal(got, want) || cursor != nil {
		t.Errorf("paged toolsets = %v (cursor %v), want %v", got, cursor, want)
	}
	res, err := rawClient(t, env).ListToolsetsWithResponse(tsCtx, &client.ListToolsetsParams{Limit: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "limit=0", res.StatusCode(), http.StatusBadRequest, res.Body)
	assertProblems(t, res.Body, "limit")
}

func TestContractToolsetScopes(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)
	createToolset(t, admin, "support", "crm.*")
	key := func(scopes ...client.Scope) *client.ClientWithResponses {
		return env.ClientWithKey(t, createKey(t, admin, "k", scopes, nil).Key)
	}
	type call func(c *client.ClientWithResponses) (int, error)
	reads := map[string]call{
		"list": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.ListToolsetsWithResponse(tsCtx, nil))
		},
		"get": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.GetToolsetWithResponse(tsCtx, "support"))
		},
	}
	writes := map[string]call{
		"create": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.CreateToolsetWithResponse(tsCtx, client.ToolsetInput{Name: ptr("other"), Tools: []string{"crm"}}))
		},
		"replace": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.ReplaceToolsetWithResponse(tsCtx, "support", nil, client.ToolsetInput{Tools: []string{"crm"}}))
		},
		"delete": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.DeleteToolsetWithResponse(tsCtx, "nope", nil))
		},
	}
	ok := func(s int) bool { return s < 400 || s == http.StatusNotFound }
	is := func(want int) func(int) bool { return func(s int) bool { return s == want } }
	for _, tc := range []struct {
		who     string
		c       *client.ClientWithResponses
		calls   map[string]call
		allowed func(int) bool
		want    string
	}{
		{"reader reads", key(client.ScopeConnectorsRead), reads, ok, "success"},
		{"reader writes", key(client.ScopeConnectorsRead), writes, is(http.StatusForbidden), "403"},
		{"writer reads", key(client.ScopeConnectorsWrite), reads, ok, "success (write implies read)"},
		{"writer writes", key(client.ScopeConnectorsWrite), writes, ok, "success"},
		{"invoker reads", key(client.ScopeInvoke, client.ScopeLLM), reads, is(http.StatusForbidden), "403"},
		{"invoker writes", key(client.ScopeInvoke, client.ScopeLLM), writes, is(http.StatusForbidden), "403"},
		{"anonymous reads", env.ClientWithKey(t, ""), reads, is(http.StatusUnauthorized), "401"},
		{"anonymous writes", env.ClientWithKey(t, ""), writes, is(http.StatusUnauthorized), "401"},
	} {
		t.Run(tc.who, func(t *testing.T) {
			for name, f := range tc.calls {
				status, err := f(tc.c)
				if err != nil {
					t.Fatal(err)
				}
				if !tc.allowed(status) {
					t.Errorf("%s = %d, want %s", name, status, tc.want)
				}
			}
		})
	}
}

// TestContractAPIKeyConnection: a key's bound connection is stored, shown,
// changed in place, removed when left out, validated, and carried by the
// api_key events.
func TestContractAPIKeyConnection(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)

	res, err := admin.CreateAPIKeyWithResponse(tsCtx, client.APIKeyCreate{Name: "end-user-42", Scopes: []client.Scope{client.ScopeInvoke}, Connection: ptr("user_42")})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "create", res.StatusCode(), http.StatusCreated, res.Body)
	k := res.JSON201
	if k.Connection == nil || *k.Connection != "user_42" {
		t.Errorf("created key = %s, want connection user_42", res.Body)
	}
	get, err := admin.GetAPIKeyWithResponse(tsCtx, k.Id)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "get", get.StatusCode(), http.StatusOK, get.Body)
	if get.JSON200.Connection == nil || *get.JSON200.Connection != "user_42" {
		t.Errorf("get = %s, want connection user_42", get.Body)
	}
	// The bound connection reaches the principal the key authenticates as.
	if p, err := env.Server.Keys().Authenticate(tsCtx, k.Key); err != nil || p.Connection != "user_42" {
		t.Errorf("principal = %+v, %v; want connection user_42", p, err)
	}

	upd, err := admin.UpdateAPIKeyWithResponse(tsCtx, k.Id, &client.UpdateAPIKeyParams{IfMatch: ptr(`"1"`)},
		client.APIKeyUpdate{Name: "end-user-42", Connection: ptr("user-43")})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "update", upd.StatusCode(), http.StatusOK, upd.Body)
	if upd.JSON200.Connection == nil || *upd.JSON200.Connection != "user-43" || upd.JSON200.Version != 2 {
		t.Errorf("updated = %s, want connection user-43 at version 2", upd.Body)
	}
	if p, err := env.Server.Keys().Authenticate(tsCtx, k.Key); err != nil || p.Connection != "user-43" {
		t.Errorf("principal after update = %+v, %v; want connection user-43", p, err)
	}
	// Left out: the key is no longer bound.
	upd, err = admin.UpdateAPIKeyWithResponse(tsCtx, k.Id, nil, client.APIKeyUpdate{Name: "end-user-42"})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "update without connection", upd.StatusCode(), http.StatusOK, upd.Body)
	if upd.JSON200.Connection != nil || strings.Contains(string(upd.Body), `"connection"`) {
		t.Errorf("updated = %s, want no connection", upd.Body)
	}

	// The events carry the connection.
	var conns []any
	for _, typ := range []client.EventType{client.EventTypeAPIKeyCreated, client.EventTypeAPIKeyUpdated} {
		for _, d := range toolsetEvents(t, admin, typ) {
			if d["id"] == k.Id {
				conns = append(conns, d["connection"])
			}
		}
	}
	if want := []any{"user_42", "user-43", nil}; !reflect.DeepEqual(conns, want) {
		t.Errorf("connections in api_key events = %v, want %v", conns, want)
	}

	raw := rawClient(t, env)
	for _, bad := range []string{"User42", "-lead", "a/b", strings.Repeat("c", 65), " "} {
		t.Run("create "+bad, func(t *testing.T) {
			res, err := raw.CreateAPIKeyWithResponse(tsCtx, client.APIKeyCreate{Name: "x", Scopes: []client.Scope{client.ScopeInvoke}, Connection: &bad})
			if err != nil {
				t.Fatal(err)
			}
			wantStatus(t, "create", res.StatusCode(), http.StatusUnprocessableEntity, res.Body)
			assertProblems(t, res.Body, "connection")
		})
		t.Run("update "+bad, func(t *testing.T) {
			res, err := raw.UpdateAPIKeyWithResponse(tsCtx, k.Id, nil, client.APIKeyUpdate{Name: "x", Connection: &bad})
			if err != nil {
				t.Fatal(err)
			}
			wantStatus(t, "update", res.StatusCode(), http.StatusUnprocessableEntity, res.Body)
			assertProblems(t, res.Body, "connection")
		})
	}
}
