package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

var connCtx = context.Background()

func connStr(s string) *string { return &s }

// weatherConnector is a valid apiKey connector input.
func weatherConnector(name string) client.ConnectorInput {
	in := client.ConnectorAuthInHeader
	return client.ConnectorInput{
		Name:        &name,
		DisplayName: connStr("Weather"),
		Description: connStr("Forecasts"),
		BaseUrl:     "https://api.weather.example/v1",
		Auth:        client.ConnectorAuth{Type: client.ConnectorAuthAPIKey, Name: connStr("X-API-Key"), In: &in},
	}
}

// forecastAction is a valid action input using every kind of template.
func forecastAction(name string) client.ActionInput {
	units := client.ActionParameterInQuery
	enum := []any{"metric", "imperial"}
	var def any = "metric"
	headers := map[string]string{"X-Units": "{{params.units}}", "Accept": "application/json"}
	params := map[string]client.ActionParameter{
		"city":  {Type: client.ActionParameterString, Required: ptrTo(true), Description: connStr("City name")},
		"units": {Type: client.ActionParameterString, Enum: &enum, Default: def, In: &units},
		"days":  {Type: client.ActionParameterInteger, Default: any(float64(3))},
	}
	timeout := 5000
	return client.ActionInput{
		Name:           &name,
		Description:    connStr("Daily forecast"),
		Method:         client.ActionMethodPOST,
		Path:           "/forecast/{{ params.city }}",
		Parameters:     &params,
		Headers:        &headers,
		Body:           map[string]any{"days": "{{params.days}}", "note": "for {{params.city}}"},
		Transformation: connStr("return {days: data.days.length};"),
		TimeoutMs:      &timeout,
	}
}

func ptrTo[T any](v T) *T { return &v }

// connResult is the status and body of a generated client's response, or
// its error (the response is nil then).
func connResult[R interface{ StatusCode() int }](r R, err error) (int, []byte, error) {
	if err != nil {
		return 0, nil, err
	}
	return r.StatusCode(), reflect.ValueOf(r).Elem().FieldByName("Body").Bytes(), nil
}

// connStatus is the status of a generated client's response, or its error.
func connStatus[R interface{ StatusCode() int }](r R, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return r.StatusCode(), nil
}

func createConnector(t *testing.T, c *client.ClientWithResponses, in client.ConnectorInput) *client.Connector {
	t.Helper()
	res, err := c.CreateConnectorWithResponse(connCtx, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusCreated || res.JSON201 == nil {
		t.Fatalf("create connector = %d %s, want 201", res.StatusCode(), res.Body)
	}
	return res.JSON201
}

func createAction(t *testing.T, c *client.ClientWithResponses, connector string, in client.ActionInput) *client.Action {
	t.Helper()
	res, err := c.CreateActionWithResponse(connCtx, connector, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusCreated || res.JSON201 == nil {
		t.Fatalf("create action = %d %s, want 201", res.StatusCode(), res.Body)
	}
	return res.JSON201
}

// wantStatus fails unless got is want, showing the body.
func wantStatus(t *testing.T, what string, got, want int, body []byte) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %d %s, want %d", what, got, body, want)
	}
}

// errorCode returns error.code of an error body.
func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return e.Error.Code
}

func ifMatch(tag string) client.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("If-Match", tag)
		return nil
	}
}

func TestContractConnectorLifecycle(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)

	res, err := c.CreateConnectorWithResponse(connCtx, weatherConnector("weather"))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "create", res.StatusCode(), http.StatusCreated, res.Body)
	created := res.JSON201
	if got := res.HTTPResponse.Header.Get("ETag"); got != `"1"` {
		t.Errorf("ETag = %q, want \"1\"", got)
	}
	if got := res.HTTPResponse.Header.Get("Location"); got != "/v1/connectors/weather" {
		t.Errorf("Location = %q", got)
	}
	if created.Name != "weather" || created.Version != 1 || *created.DisplayName != "Weather" || created.BaseUrl != "https://api.weather.example/v1" ||
		created.Auth.Type != client.ConnectorAuthAPIKey || *created.Auth.Name != "X-API-Key" || *created.Auth.In != client.ConnectorAuthInHeader ||
		created.Auth.ClientSecretSet == nil || *created.Auth.ClientSecretSet || !created.CreatedAt.Equal(created.UpdatedAt) ||
		time.Since(created.CreatedAt) > time.Minute || created.CreatedAt.Location() != time.UTC {
		t.Errorf("created = %s", res.Body)
	}

	got, err := c.GetConnectorWithResponse(connCtx, "weather")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "get", got.StatusCode(), http.StatusOK, got.Body)
	if !reflect.DeepEqual(got.JSON200, created) || got.HTTPResponse.Header.Get("ETag") != `"1"` {
		t.Errorf("get = %s (ETag %q), want what create returned", got.Body, got.HTTPResponse.Header.Get("ETag"))
	}

	// Replace: whole definition, name may be left out, version +1.
	in := weatherConnector("weather")
	in.Name = nil
	in.DisplayName = nil
	in.BaseUrl = "https://api.weather.example/v2"
	in.Auth = client.ConnectorAuth{Type: client.ConnectorAuthBearer}
	rep, err := c.ReplaceConnectorWithResponse(connCtx, "weather", nil, in)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "replace", rep.StatusCode(), http.StatusOK, rep.Body)
	r := rep.JSON200
	if r.Version != 2 || r.DisplayName != nil || r.BaseUrl != "https://api.weather.example/v2" || r.Auth.Type != client.ConnectorAuthBearer ||
		r.Auth.Name != nil || !r.CreatedAt.Equal(created.CreatedAt) || r.UpdatedAt.Before(created.UpdatedAt) || rep.HTTPResponse.Header.Get("ETag") != `"2"` {
		t.Errorf("replaced = %s (ETag %q)", rep.Body, rep.HTTPResponse.Header.Get("ETag"))
	}

	list, err := c.ListConnectorsWithResponse(connCtx, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "list", list.StatusCode(), http.StatusOK, list.Body)
	if len(list.JSON200.Data) != 1 || !reflect.DeepEqual(list.JSON200.Data[0], *r) || list.JSON200.NextCursor != nil {
		t.Errorf("list = %s", list.Body)
	}

	del, err := c.DeleteConnectorWithResponse(connCtx, "weather", nil)
	if err != nil {
		t.Fatal(err)
	}
	if del.StatusCode() != http.StatusNoContent || len(del.Body) != 0 {
		t.Fatalf("delete = %d %s, want 204 without body", del.StatusCode(), del.Body)
	}
	for name, call := range map[string]func() (int, []byte, error){
		"get": func() (int, []byte, error) {
			return connResult(c.GetConnectorWithResponse(connCtx, "weather"))
		},
		"replace": func() (int, []byte, error) {
			return connResult(c.ReplaceConnectorWithResponse(connCtx, "weather", nil, in))
		},
		"delete": func() (int, []byte, error) {
			return connResult(c.DeleteConnectorWithResponse(connCtx, "weather", nil))
		},
	} {
		status, body, err := call()
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusNotFound || errorCode(t, body) != "not_found" || !strings.Contains(string(body), `connector \"weather\" not found`) {
			t.Errorf("%s after delete = %d %s, want 404 naming the connector", name, status, body)
		}
	}
}

func TestContractActionLifecycle(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	createConnector(t, c, weatherConnector("weather"))

	res, err := c.CreateActionWithResponse(connCtx, "weather", forecastAction("forecast"))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "create action", res.StatusCode(), http.StatusCreated, res.Body)
	a := res.JSON201
	if res.HTTPResponse.Header.Get("ETag") != `"1"` || res.HTTPResponse.Header.Get("Location") != "/v1/connectors/weather/actions/forecast" {
		t.Errorf("headers = %v", res.HTTPResponse.Header)
	}
	if a.Connector != "weather" || a.Name != "forecast" || a.Method != client.ActionMethodPOST || a.Path != "/forecast/{{ params.city }}" ||
		a.Version != 1 || *a.TimeoutMs != 5000 || *a.Transformation != "return {days: data.days.length};" ||
		a.Headers["X-Units"] != "{{params.units}}" || len(a.Parameters) != 3 {
		t.Errorf("created = %s", res.Body)
	}
	city, units, days := a.Parameters["city"], a.Parameters["units"], a.Parameters["days"]
	if !*city.Required || *city.Description != "City name" || city.In != nil ||
		*units.Required || *units.In != client.ActionParameterInQuery || units.Default != "metric" || !reflect.DeepEqual(*units.Enum, []any{"metric", "imperial"}) ||
		days.Type != client.ActionParameterInteger || days.Default != float64(3) {
		t.Errorf("parameters = %+v", a.Parameters)
	}
	if !reflect.DeepEqual(a.Body, map[string]any{"days": "{{params.days}}", "note": "for {{params.city}}"}) {
		t.Errorf("body = %#v", a.Body)
	}

	got, err := c.GetActionWithResponse(connCtx, "weather", "forecast")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "get action", got.StatusCode(), http.StatusOK, got.Body)
	if !reflect.DeepEqual(got.JSON200, a) || got.HTTPResponse.Header.Get("ETag") != `"1"` {
		t.Errorf("get = %s, want what create returned", got.Body)
	}

	// A minimal replacement: defaults everywhere, empty maps in the response.
	rep, err := c.ReplaceActionWithResponse(connCtx, "weather", "forecast", &client.ReplaceActionParams{IfMatch: connStr(`"1"`)},
		client.ActionInput{Method: client.ActionMethodGET, Path: "/today"})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "replace action", rep.StatusCode(), http.StatusOK, rep.Body)
	r := rep.JSON200
	if r.Version != 2 || r.Name != "forecast" || r.Path != "/today" || r.Body != nil || r.Transformation != nil || r.TimeoutMs != nil ||
		r.Parameters == nil || len(r.Parameters) != 0 || r.Headers == nil || len(r.Headers) != 0 || !r.CreatedAt.Equal(a.CreatedAt) ||
		rep.HTTPResponse.Header.Get("ETag") != `"2"` {
		t.Errorf("replaced = %s", rep.Body)
	}
	if !bytes.Contains(rep.Body, []byte(`"parameters":{}`)) || !bytes.Contains(rep.Body, []byte(`"headers":{}`)) {
		t.Errorf("replaced body %s lacks empty parameters/headers objects", rep.Body)
	}

	list, err := c.ListActionsWithResponse(connCtx, "weather", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "list actions", list.StatusCode(), http.StatusOK, list.Body)
	if len(list.JSON200.Data) != 1 || list.JSON200.Data[0].Version != 2 || list.JSON200.NextCursor != nil {
		t.Errorf("list = %s", list.Body)
	}

	del, err := c.DeleteActionWithResponse(connCtx, "weather", "forecast", &client.DeleteActionParams{IfMatch: connStr(`"2"`)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "delete action", del.StatusCode(), http.StatusNoContent, del.Body)
	g, err := c.GetActionWithResponse(connCtx, "weather", "forecast")
	if err != nil {
		t.Fatal(err)
	}
	if g.StatusCode() != http.StatusNotFound || !strings.Contains(string(g.Body), `action \"forecast\" of connector \"weather\" not found`) {
		t.Errorf("get after delete = %d %s", g.StatusCode(), g.Body)
	}
	d2, err := c.DeleteActionWithResponse(connCtx, "weather", "forecast", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "second delete", d2.StatusCode(), http.StatusNotFound, d2.Body)
}

func TestContractConnectorNotFound(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	for name, call := range map[string]func() (int, []byte, error){
		"get connector": func() (int, []byte, error) {
			return connResult(c.GetConnectorWithResponse(connCtx, "nope"))
		},
		"create action": func() (int, []byte, error) {
			return connResult(c.CreateActionWithResponse(connCtx, "nope", forecastAction("forecast")))
		},
		"list actions": func() (int, []byte, error) {
			return connResult(c.ListActionsWithResponse(connCtx, "nope", nil))
		},
		"get action": func() (int, []byte, error) {
			return connResult(c.GetActionWithResponse(connCtx, "nope", "forecast"))
		},
		"replace action": func() (int, []byte, error) {
			return connResult(c.ReplaceActionWithResponse(connCtx, "nope", "forecast", nil, forecastAction("forecast")))
		},
		"delete action": func() (int, []byte, error) {
			return connResult(c.DeleteActionWithResponse(connCtx, "nope", "forecast", nil))
		},
	} {
		t.Run(name, func(t *testing.T) {
			status, body, err := call()
			if err != nil {
				t.Fatal(err)
			}
			if status != http.StatusNotFound || !strings.Contains(string(body), `connector \"nope\" not found`) {
				t.Errorf("= %d %s, want 404 naming the connector", status, body)
			}
		})
	}
}

func TestContractConnectorConflict(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	createConnector(t, c, weatherConnector("weather"))
	res, err := c.CreateConnectorWithResponse(connCtx, weatherConnector("weather"))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "second create", res.StatusCode(), http.StatusConflict, res.Body)
	if errorCode(t, res.Body) != "conflict" || !strings.Contains(string(res.Body), "already exists") {
		t.Errorf("409 body = %s", res.Body)
	}
	createAction(t, c, "weather", forecastAction("forecast"))
	ar, err := c.CreateActionWithResponse(connCtx, "weather", forecastAction("forecast"))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "second action create", ar.StatusCode(), http.StatusConflict, ar.Body)
	// The same action name in another connector is fine.
	createConnector(t, c, weatherConnector("weather2"))
	createAction(t, c, "weather2", forecastAction("forecast"))
}

func TestContractConnectorPaging(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	var want []string
	for _, n := range []string{"echo", "alpha", "delta", "bravo", "charlie"} {
		createConnector(t, c, weatherConnector(n))
		want = append(want, n)
	}
	slices.Sort(want)
	var got []string
	var cursor *string
	pages := 0
	for {
		res, err := c.ListConnectorsWithResponse(connCtx, &client.ListConnectorsParams{Limit: ptrTo(2), Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, "list", res.StatusCode(), http.StatusOK, res.Body)
		pages++
		if len(res.JSON200.Data) > 2 {
			t.Fatalf("page of %d with limit 2", len(res.JSON200.Data))
		}
		for _, x := range res.JSON200.Data {
			got = append(got, x.Name)
		}
		if res.JSON200.NextCursor == nil {
			break
		}
		cursor = res.JSON200.NextCursor
	}
	if !slices.Equal(got, want) || pages != 3 {
		t.Errorf("paged names = %v in %d pages, want %v in 3", got, pages, want)
	}
	for _, limit := range []int{0, 101} {
		bad, err := rawClient(t, env).ListConnectorsWithResponse(connCtx, &client.ListConnectorsParams{Limit: ptrTo(limit)})
		if err != nil {
			t.Fatal(err)
		}
		if bad.StatusCode() != http.StatusBadRequest || !strings.Contains(string(bad.Body), "limit must be between 1 and 100") {
			t.Errorf("limit %d = %d %s, want 400", limit, bad.StatusCode(), bad.Body)
		}
	}
}

func TestContractActionPaging(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	createConnector(t, c, weatherConnector("a"))
	createConnector(t, c, weatherConnector("a_b")) // a name sharing a's prefix
	createConnector(t, c, weatherConnector("b"))
	var want []string
	for i := range 7 {
		n := fmt.Sprintf("act_%d", 6-i)
		createAction(t, c, "a", client.ActionInput{Name: &n, Method: client.ActionMethodGET, Path: "/x"})
		want = append(want, n)
	}
	createAction(t, c, "a_b", client.ActionInput{Name: connStr("other"), Method: client.ActionMethodGET, Path: "/x"})
	createAction(t, c, "b", client.ActionInput{Name: connStr("act_0"), Method: client.ActionMethodGET, Path: "/x"})
	slices.Sort(want)
	var got []string
	var cursor *string
	for {
		res, err := c.ListActionsWithResponse(connCtx, "a", &client.ListActionsParams{Limit: ptrTo(3), Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, "list actions", res.StatusCode(), http.StatusOK, res.Body)
		for _, x := range res.JSON200.Data {
			if x.Connector != "a" {
				t.Errorf("action %s of connector %s listed under a", x.Name, x.Connector)
			}
			got = append(got, x.Name)
		}
		if res.JSON200.NextCursor == nil {
			break
		}
		if strings.Contains(*res.JSON200.NextCursor, "/") {
			t.Errorf("cursor %q exposes the storage key", *res.JSON200.NextCursor)
		}
		cursor = res.JSON200.NextCursor
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged actions = %v, want %v", got, want)
	}
}

func TestContractConnectorIfMatch(t *testing.T) {
	env := servertest.New(t)
	c := env.Client(t)
	createConnector(t, c, weatherConnector("weather"))
	in := weatherConnector("weather")

	for _, tc := range []struct {
		name, header string
		want         int
	}{
		{"stale version", `"7"`, http.StatusPreconditionFailed},
		{"weak tag never matches", `W/"1"`, http.StatusPreconditionFailed},
		{"not a version", `"abc"`, http.StatusPreconditionFailed},
		{"current version", `"1"`, http.StatusOK},
		{"bare number", `2`, http.StatusOK},
		{"any", `*`, http.StatusOK},
		{"list with the current version", `"1", "4", "9"`, http.StatusOK},
		{"list without it", `"1", "2"`, http.StatusPreconditionFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.ReplaceConnectorWithResponse(connCtx, "weather", &client.ReplaceConnectorParams{IfMatch: &tc.header}, in)
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
	// Five replaces succeeded: version 5. A stale If-Match on DELETE keeps it.
	del, err := c.DeleteConnectorWithResponse(connCtx, "weather", &client.DeleteConnectorParams{IfMatch: connStr(`"4"`)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "stale delete", del.StatusCode(), http.StatusPreconditionFailed, del.Body)
	if !strings.Contains(string(del.Body), "version 5") {
		t.Errorf("412 does not say the current version: %s", del.Body)
	}
	del, err = c.DeleteConnectorWithResponse(connCtx, "weather", &client.DeleteConnectorParams{IfMatch: connStr(`"5"`)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "current delete", del.StatusCode(), http.StatusNoContent, del.Body)

	// Actions the same way.
	createConnector(t, c, weatherConnector("weather"))
	createAction(t, c, "weather", forecastAction("forecast"))
	ra, err := c.ReplaceActionWithResponse(connCtx, "weather", "forecast", &client.ReplaceActionParams{IfMatch: connStr(`"2"`)}, forecastAction("forecast"))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "stale action replace", ra.StatusCode(), http.StatusPreconditionFailed, ra.Body)
	da, err := c.DeleteActionWithResponse(connCtx, "weather", "forecast", &client.DeleteActionParams{IfMatch: connStr(`"2"`)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "stale action delete", da.StatusCode(), http.StatusPreconditionFailed, da.Body)
	// Precondition is checked before validation (RFC 9110 §13.2.2).
	bad := forecastAction("forecast")
	bad.Path = "no-slash"
	ra, err = c.ReplaceActionWithResponse(connCtx, "weather", "forecast", &client.ReplaceActionParams{IfMatch: connStr(`"9"`)}, bad)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "stale and invalid replace", ra.StatusCode(), http.StatusPreconditionFailed, ra.Body)
}

func TestContractConnectorScopes(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)
	createConnector(t, admin, weatherConnector("weather"))
	createAction(t, admin, "weather", forecastAction("forecast"))
	key := func(scopes ...client.Scope) *client.ClientWithResponses {
		res, err := admin.CreateAPIKeyWithResponse(connCtx, client.APIKeyCreate{Name: "k", Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		if res.JSON201 == nil {
			t.Fatalf("create key: %v %s", err, res.Body)
		}
		return env.ClientWithKey(t, res.JSON201.Key)
	}
	reader := key(client.ScopeConnectorsRead)
	writer := key(client.ScopeConnectorsWrite)
	invoker := key(client.ScopeInvoke)
	anonymous := env.ClientWithKey(t, "")

	type call func(c *client.ClientWithResponses) (int, error)
	reads := map[string]call{
		"list connectors": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.ListConnectorsWithResponse(connCtx, nil))
		},
		"get connector": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.GetConnectorWithResponse(connCtx, "weather"))
		},
		"list actions": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.ListActionsWithResponse(connCtx, "weather", nil))
		},
		"get action": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.GetActionWithResponse(connCtx, "weather", "forecast"))
		},
	}
	writes := map[string]call{
		"create connector": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.CreateConnectorWithResponse(connCtx, weatherConnector("other")))
		},
		"replace connector": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.ReplaceConnectorWithResponse(connCtx, "weather", nil, weatherConnector("weather")))
		},
		"create action": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.CreateActionWithResponse(connCtx, "weather", forecastAction("other")))
		},
		"replace action": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.ReplaceActionWithResponse(connCtx, "weather", "forecast", nil, forecastAction("forecast")))
		},
		"delete action": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.DeleteActionWithResponse(connCtx, "weather", "nope", nil))
		},
		"delete connector": func(c *client.ClientWithResponses) (int, error) {
			return connStatus(c.DeleteConnectorWithResponse(connCtx, "nope", nil))
		},
	}
	check := func(who string, c *client.ClientWithResponses, calls map[string]call, allowed func(int) bool, want string) {
		for name, f := range calls {
			status, err := f(c)
			if err != nil {
				t.Fatal(err)
			}
			if !allowed(status) {
				t.Errorf("%s: %s = %d, want %s", who, name, status, want)
			}
		}
	}
	ok := func(s int) bool { return s < 400 || s == http.StatusNotFound }
	is := func(want int) func(int) bool { return func(s int) bool { return s == want } }
	check("reader", reader, reads, ok, "success")
	check("reader", reader, writes, is(http.StatusForbidden), "403")
	check("writer", writer, reads, ok, "success (write implies read)")
	check("writer", writer, writes, ok, "success")
	check("invoker", invoker, reads, is(http.StatusForbidden), "403")
	check("anonymous", anonymous, reads, is(http.StatusUnauthorized), "401")
	check("anonymous", anonymous, writes, is(http.StatusUnauthorized), "401")
}

// rawClient sends requests the spec does not allow (to see them refused);
// responses are still validated.
func rawClient(t *testing.T, env *servertest.Env) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(env.URL, client.WithHTTPClient(env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestContractConnectorBadRequests(t *testing.T) {
	env := servertest.New(t, func(c *config.Config) { c.Limits.BodyBytes = 4096 })
	c := rawClient(t, env)
	createConnector(t, env.Client(t), weatherConnector("weather"))
	big := `{"name":"big","baseUrl":"https://x.example","auth":{"type":"none"},"description":"` + strings.Repeat("x", 5000) + `"}`
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
		code, message           string
	}{
		{"malformed JSON", "application/json", `{"name": "x",`, 400, "invalid_request", "offset"},
		{"wrong JSON type", "application/json", `{"name": 5, "baseUrl": "https://x.example", "auth": {"type": "none"}}`, 400, "invalid_request", "name"},
		{"unknown field", "application/json", `{"name": "x", "baseUrl": "https://x.example", "auth": {"type": "none"}, "colour": 1}`, 400, "invalid_request", "unknown field"},
		{"unknown auth field", "application/json", `{"name": "x", "baseUrl": "https://x.example", "auth": {"type": "none", "token": "t"}}`, 400, "invalid_request", "unknown field"},
		{"not JSON", "text/plain", `name=x`, 415, "unsupported_media", "application/json"},
		{"too large", "application/json", big, 413, "too_large", "limits.bodyBytes"},
		{"empty body", "application/json", ``, 400, "invalid_request", "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for what, send := range map[string]func() (int, []byte, error){
				"create": func() (int, []byte, error) {
					return connResult(c.CreateConnectorWithBodyWithResponse(connCtx, tc.contentType, strings.NewReader(tc.body)))
				},
				"replace": func() (int, []byte, error) {
					return connResult(c.ReplaceConnectorWithBodyWithResponse(connCtx, "weather", nil, tc.contentType, strings.NewReader(tc.body)))
				},
				"create action": func() (int, []byte, error) {
					return connResult(c.CreateActionWithBodyWithResponse(connCtx, "weather", tc.contentType, strings.NewReader(strings.Replace(tc.body, `"baseUrl"`, `"path"`, 1))))
				},
			} {
				status, body, err := send()
				if err != nil {
					t.Fatal(err)
				}
				if status != tc.status || errorCode(t, body) != tc.code || !strings.Contains(string(body), tc.message) {
					t.Errorf("%s: = %d %s, want %d %s mentioning %q", what, status, body, tc.status, tc.code, tc.message)
				}
			}
		})
	}
	// Nothing was stored or changed by the refused requests.
	res, err := env.Client(t).GetConnectorWithResponse(connCtx, "weather")
	if err != nil {
		t.Fatal(err)
	}
	if res.JSON200 == nil || res.JSON200.Version != 1 {
		t.Fatalf("after bad requests: %v %s", err, res.Body)
	}
}
