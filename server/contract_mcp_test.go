package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/tools"
)

// The protocol versions the MCP tests speak: the newest (stateless,
// server/discover) and the newest with the initialize handshake.
var mcpVersions = []string{"2026-07-28", "2025-11-25"}

// mcpEnv is a server with two connectors whose upstream echoes each
// request, and keys to call /mcp with.
type mcpEnv struct {
	*ienv
	up *upstream
	// invokeKey may run everything; weatherKey only the weather connector;
	// llmKey lacks the invoke scope; aliceKey is bound to connection alice.
	invokeKey, weatherKey, llmKey, aliceKey string
}

func newMCPEnv(t *testing.T) *mcpEnv {
	t.Helper()
	e := &mcpEnv{ienv: newIEnv(t)}
	e.up = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/broken"):
			http.Error(w, `{"message":"upstream exploded"}`, http.StatusInternalServerError)
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "uri": r.RequestURI, "key": r.Header.Get("X-Api-Key")})
		}
	})
	e.connector(connectors.Connector{Name: "weather", DisplayName: "Weather", BaseURL: e.up.URL,
		Auth: connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-Api-Key", In: "header"}},
		connectors.Action{Name: "forecast", Description: "Forecast for a city.", Method: "GET", Path: "/forecast/{{params.city}}",
			Parameters: map[string]connectors.Parameter{
				"city":  {Type: "string", Required: true, Description: "City name."},
				"days":  {Type: "integer", Description: "How many days.", Default: float64(3)},
				"units": {Type: "string", Enum: []any{"metric", "imperial"}},
			}},
		connectors.Action{Name: "broken", Method: "GET", Path: "/broken"},
		connectors.Action{Name: "forget", Method: "DELETE", Path: "/cities/{{params.city}}",
			Parameters: map[string]connectors.Parameter{"city": {Type: "string", Required: true}}},
	)
	e.connector(connectors.Connector{Name: "crm", BaseURL: e.up.URL},
		connectors.Action{Name: "create_lead", Method: "POST", Path: "/leads", Parameters: map[string]connectors.Parameter{"email": {Type: "string", Required: true}}},
		connectors.Action{Name: "put_lead", Method: "PUT", Path: "/leads/{{params.id}}", Parameters: map[string]connectors.Parameter{"id": {Type: "string", Required: true}}},
	)
	for _, name := range []string{"default", "alice", "bob"} {
		e.connection("weather", connectionInput(name, "key-of-"+name))
	}
	e.invokeKey = e.key(auth.NewAPIKeyInput{Name: "agent", Scopes: []string{auth.ScopeInvoke}})
	e.weatherKey = e.key(auth.NewAPIKeyInput{Name: "weather-only", Scopes: []string{auth.ScopeInvoke}, Policy: auth.Policy{Connectors: []string{"weather"}}})
	e.llmKey = e.key(auth.NewAPIKeyInput{Name: "llm", Scopes: []string{auth.ScopeLLM}})
	e.aliceKey = e.key(auth.NewAPIKeyInput{Name: "alice", Scopes: []string{auth.ScopeInvoke}, Connection: "alice"})
	return e
}

func connectionInput(name, apiKey string) (in client.ConnectionInput) {
	in.Name, in.ApiKey = &name, &apiKey
	return in
}

func (e *mcpEnv) key(in auth.NewAPIKeyInput) string {
	e.t.Helper()
	_, secret, err := e.Server.Keys().Create(context.Background(), in)
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// headerTransport adds headers to every request.
type headerTransport struct {
	next http.RoundTripper
	h    http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.next.RoundTrip(r)
}

// session connects an MCP client to path with key, speaking version.
func (e *mcpEnv) session(t *testing.T, path, key, version string, h http.Header, opts *mcpsdk.ClientOptions) (*mcpsdk.ClientSession, error) {
	t.Helper()
	hc := e.HTTPClient(t, servertest.WithKey(key))
	if h != nil {
		hc.Transport = headerTransport{next: hc.Transport, h: h}
	}
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: e.URL + path, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true},
		&mcpsdk.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func (e *mcpEnv) mustSession(t *testing.T, path, key, version string, h http.Header) *mcpsdk.ClientSession {
	t.Helper()
	cs, err := e.session(t, path, key, version, h, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", path, err)
	}
	return cs
}

func toolNames(t *testing.T, cs *mcpsdk.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func TestMCP_ListsTheCallersTools(t *testing.T) {
	e := newMCPEnv(t)
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) {
			cs := e.mustSession(t, "/mcp", e.invokeKey, v, nil)
			if got := cs.InitializeResult().ServerInfo.Name; got != "switchboard" {
				t.Errorf("server name = %q", got)
			}
			want := []string{"crm-create_lead", "crm-put_lead", "weather-broken", "weather-forecast", "weather-forget"}
			if got := toolNames(t, cs); !slices.Equal(got, want) {
				t.Errorf("tools = %v, want %v", got, want)
			}
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]*mcpsdk.Tool{}
			for _, tool := range res.Tools {
				byName[tool.Name] = tool
			}
			f := byName["weather-forecast"]
			if f.Description != "Forecast for a city." || f.Title != "Weather: forecast" {
				t.Errorf("forecast = %q / %q", f.Description, f.Title)
			}
			schema, _ := json.Marshal(f.InputSchema)
			for _, s := range []string{`"required":["city"]`, `"enum":["metric","imperial"]`, `"days":{"default":3,"description":"How many days.","type":"integer"}`, `"additionalProperties":false`} {
				if !strings.Contains(string(schema), s) {
					t.Errorf("forecast inputSchema %s lacks %s", schema, s)
				}
			}
			hints := map[string][3]bool{ // readOnly, destructive, idempotent
				"weather-forecast": {true, false, true}, "weather-forget": {false, true, true},
				"crm-create_lead": {false, false, false}, "crm-put_lead": {false, false, true},
			}
			for name, want := range hints {
				a := byName[name].Annotations
				destructive := a.DestructiveHint != nil && *a.DestructiveHint
				if got := [3]bool{a.ReadOnlyHint, destructive, a.IdempotentHint}; got != want {
					t.Errorf("%s hints (readOnly, destructive, idempotent) = %v, want %v", name, got, want)
				}
			}
		})
	}
	t.Run("policy narrows the list", func(t *testing.T) {
		cs := e.mustSession(t, "/mcp", e.weatherKey, mcpVersions[0], nil)
		if got, want := toolNames(t, cs), []string{"weather-broken", "weather-forecast", "weather-forget"}; !slices.Equal(got, want) {
			t.Errorf("tools = %v, want %v", got, want)
		}
		_, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "crm-create_lead", Arguments: map[string]any{"email": "a@b.c"}})
		if err == nil || !strings.Contains(err.Error(), "may not run crm.create_lead") {
			t.Errorf("call outside the policy = %v, want a protocol error naming the policy", err)
		}
	})
}

func TestMCP_CallsRunTheAction(t *testing.T) {
	e := newMCPEnv(t)
	cs := e.mustSession(t, "/mcp", e.invokeKey, mcpVersions[0], nil)
	ctx := context.Background()
	tests := []struct {
		name      string
		tool      string
		args      map[string]any
		wantError bool
		want      string // in the text content
	}{
		{"result", "weather-forecast", map[string]any{"city": "Paris", "units": "metric"}, false, `"uri":"/forecast/Paris?days=3\u0026units=metric"`},
		{"upstream failure is a tool error", "weather-broken", nil, true, `"code":"upstream_error"`},
		{"invalid parameters are a tool error", "weather-forecast", map[string]any{"city": "Rome", "units": "kelvin"}, true, `"code":"invalid_request"`},
		{"missing parameter is a tool error", "weather-forecast", map[string]any{}, true, "city"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if err != nil {
				t.Fatalf("tools/call: %v", err)
			}
			if res.IsError != tc.wantError {
				t.Errorf("isError = %v, want %v", res.IsError, tc.wantError)
			}
			text := res.Content[0].(*mcpsdk.TextContent).Text
			if !strings.Contains(text, tc.want) {
				t.Errorf("text %s lacks %s", text, tc.want)
			}
			structured, _ := json.Marshal(res.StructuredContent)
			var a, b any
			_ = json.Unmarshal(structured, &a)
			_ = json.Unmarshal([]byte(text), &b)
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("structuredContent %s differs from the text %s", structured, text)
			}
			if !tc.wantError {
				var out struct {
					Status     int             `json:"status"`
					Result     json.RawMessage `json:"result"`
					DurationMs *int64          `json:"durationMs"`
				}
				if err := json.Unmarshal(structured, &out); err != nil || out.Status != 200 || out.DurationMs == nil || len(out.Result) == 0 {
					t.Errorf("structuredContent = %s, want {result, status: 200, durationMs}", structured)
				}
			}
		})
	}
	t.Run("unknown tool is a protocol error", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "weather-nope"})
		if err == nil || !strings.Contains(err.Error(), `no tool named "weather-nope"`) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("calls are in the invocation log", func(t *testing.T) {
		if err := e.Server.Invoker().Log.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		list, _, err := e.Server.Invoker().Log.List(ctx, "weather", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		var ok, failed int
		for _, inv := range list {
			switch {
			case inv.Action == "forecast" && inv.ErrorCode == "" && inv.RequestID != "":
				ok++
			case inv.Action == "broken" && inv.ErrorCode == "upstream_error":
				failed++
			}
		}
		if ok != 1 || failed != 1 {
			t.Errorf("log has %d successful forecasts and %d failed broken calls, want 1 and 1: %+v", ok, failed, list)
		}
	})
}

func TestMCP_Connection(t *testing.T) {
	e := newMCPEnv(t)
	ctx := context.Background()
	// usedKey calls a tool and answers the API key the upstream received,
	// or the tool error.
	usedKey := func(t *testing.T, cs *mcpsdk.ClientSession) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "weather-forecast", Arguments: map[string]any{"city": "Lima"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			return res.Content[0].(*mcpsdk.TextContent).Text
		}
		return e.up.last(t).Header.Get("X-Api-Key")
	}
	header := func(conn string) http.Header { return http.Header{tools.ConnectionHeader: {conn}} }
	t.Run("default without a header", func(t *testing.T) {
		cs := e.mustSession(t, "/mcp", e.invokeKey, mcpVersions[0], nil)
		if got := usedKey(t, cs); got != "key-of-default" {
			t.Errorf("upstream got key %q, want the default connection's", got)
		}
	})
	t.Run("header picks the connection", func(t *testing.T) {
		cs := e.mustSession(t, "/mcp", e.invokeKey, mcpVersions[0], header("bob"))
		if got := usedKey(t, cs); got != "key-of-bob" {
			t.Errorf("upstream got key %q, want bob's", got)
		}
	})
	t.Run("bound key uses its connection", func(t *testing.T) {
		cs := e.mustSession(t, "/mcp", e.aliceKey, mcpVersions[0], nil)
		if got := usedKey(t, cs); got != "key-of-alice" {
			t.Errorf("upstream got key %q, want alice's", got)
		}
	})
	t.Run("bound key cannot pick another", func(t *testing.T) {
		_, err := e.session(t, "/mcp", e.aliceKey, mcpVersions[0], header("bob"), nil)
		if err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("connect = %v, want 403 Forbidden", err)
		}
	})
	t.Run("unknown connection is a tool error", func(t *testing.T) {
		cs := e.mustSession(t, "/mcp", e.invokeKey, mcpVersions[0], header("carol"))
		if got := usedKey(t, cs); !strings.Contains(got, "not_found") || !strings.Contains(got, "carol") {
			t.Errorf("result = %s, want a not_found tool error naming carol", got)
		}
	})
	t.Run("bound key on /run", func(t *testing.T) {
		hc := e.HTTPClient(t, servertest.WithKey(e.aliceKey))
		resp, err := hc.Post(e.URL+"/v1/integrations/weather/run", "application/json", strings.NewReader(`{"action":"forecast","params":{"city":"Kyiv"},"connection":"bob"}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `bound to connection \"alice\"`) {
			t.Errorf("run with another connection = %d %s, want 403 naming the bound connection", resp.StatusCode, b)
		}
	})
}

func TestMCP_Auth(t *testing.T) {
	e := newMCPEnv(t)
	post := func(t *testing.T, path, key string) (*http.Response, string) {
		t.Helper()
		hc := e.HTTPClient(t, servertest.AllowInvalidRequests())
		req, _ := http.NewRequest(http.MethodPost, e.URL+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	tests := []struct {
		name, path, key string
		status          int
		wwwAuth         string
	}{
		{"no credential", "/mcp", "", 401, `Bearer realm="switchboard", resource_metadata="` + e.URL + `/.well-known/oauth-protected-resource/mcp", scope="invoke"`},
		{"no credential on a toolset", "/mcp/support", "", 401, `resource_metadata="` + e.URL + `/.well-known/oauth-protected-resource/mcp/support"`},
		{"unknown key", "/mcp", "sb_nope", 401, "resource_metadata="},
		{"key without invoke", "/mcp", e.llmKey, 403, `error="insufficient_scope", scope="invoke"`},
		{"unknown toolset", "/mcp/nope", e.invokeKey, 404, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, tc.path, tc.key)
			if resp.StatusCode != tc.status {
				t.Fatalf("status = %d %s, want %d", resp.StatusCode, body, tc.status)
			}
			if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, tc.wwwAuth) || (tc.wwwAuth == "") != (got == "") {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tc.wwwAuth)
			}
		})
	}
	t.Run("protected resource metadata", func(t *testing.T) {
		hc := e.HTTPClient(t)
		for path, want := range map[string]string{
			"/.well-known/oauth-protected-resource":             e.URL,
			"/.well-known/oauth-protected-resource/mcp":         e.URL + "/mcp",
			"/.well-known/oauth-protected-resource/mcp/support": e.URL + "/mcp/support",
		} {
			resp, err := hc.Get(e.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			var md struct {
				Resource             string   `json:"resource"`
				AuthorizationServers []string `json:"authorization_servers"`
				ScopesSupported      []string `json:"scopes_supported"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&md)
			resp.Body.Close()
			if md.Resource != want || !slices.Equal(md.AuthorizationServers, []string{e.Config.TokenIssuer()}) || len(md.ScopesSupported) == 0 {
				t.Errorf("%s = %+v, want resource %s and the issuer %s", path, md, want, e.Config.TokenIssuer())
			}
		}
	})
}

func TestMCP_Toolsets(t *testing.T) {
	e := newMCPEnv(t)
	ctx := context.Background()
	if _, err := e.Server.Toolsets().Create(ctx, tools.Toolset{Name: "support", Tools: []string{"weather.forecast", "crm.*"}}); err != nil {
		t.Fatal(err)
	}
	cs := e.mustSession(t, "/mcp/support", e.invokeKey, mcpVersions[0], nil)
	if got, want := toolNames(t, cs), []string{"crm-create_lead", "crm-put_lead", "weather-forecast"}; !slices.Equal(got, want) {
		t.Errorf("toolset tools = %v, want %v", got, want)
	}
	if _, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "weather-broken"}); err == nil || !strings.Contains(err.Error(), "no tool named") {
		t.Errorf("call outside the toolset = %v, want unknown tool", err)
	}
	// The key's policy narrows the toolset further.
	cs = e.mustSession(t, "/mcp/support", e.weatherKey, mcpVersions[0], nil)
	if got, want := toolNames(t, cs), []string{"weather-forecast"}; !slices.Equal(got, want) {
		t.Errorf("toolset tools under a weather-only policy = %v, want %v", got, want)
	}
}

func TestMCP_Pagination(t *testing.T) {
	e := newMCPEnv(t)
	ctx := context.Background()
	const extra = 250 // with the 5 of newMCPEnv: two pages of 200
	if _, err := e.Server.Connectors().CreateConnector(ctx, connectors.Connector{Name: "big", BaseURL: e.up.URL}); err != nil {
		t.Fatal(err)
	}
	for i := range extra {
		if _, err := e.Server.Connectors().CreateAction(ctx, "big", connectors.Action{Name: fmt.Sprintf("op_%03d", i), Method: "GET", Path: "/x"}); err != nil {
			t.Fatal(err)
		}
	}
	cs := e.mustSession(t, "/mcp", e.invokeKey, mcpVersions[0], nil)
	first, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Tools) != 200 || first.NextCursor == "" {
		t.Fatalf("first page has %d tools, cursor %q; want 200 and a cursor", len(first.Tools), first.NextCursor)
	}
	// An action created before the cursor's position does not shift the next page.
	if _, err := e.Server.Connectors().CreateAction(ctx, "big", connectors.Action{Name: "op_000a", Method: "GET", Path: "/x"}); err != nil {
		t.Fatal(err)
	}
	second, err := cs.ListTools(ctx, &mcpsdk.ListToolsParams{Cursor: first.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if second.NextCursor != "" || len(second.Tools) != extra+5-200 {
		t.Errorf("second page has %d tools, cursor %q; want %d and none", len(second.Tools), second.NextCursor, extra+5-200)
	}
	if last, next := first.Tools[len(first.Tools)-1].Name, second.Tools[0].Name; last >= next {
		t.Errorf("pages overlap or go back: %s then %s", last, next)
	}
	if _, err := cs.ListTools(ctx, &mcpsdk.ListToolsParams{Cursor: "!!"}); err == nil {
		t.Error("a bad cursor was accepted")
	}
}

func TestMCP_ListChanged(t *testing.T) {
	e := newMCPEnv(t)
	ctx := context.Background()
	var changed atomic.Int32
	cs, err := e.session(t, "/mcp", e.invokeKey, "2026-07-28", nil, &mcpsdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) { changed.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	before := len(toolNames(t, cs))
	if _, err := e.Server.Connectors().CreateAction(ctx, "crm", connectors.Action{Name: "delete_lead", Method: "DELETE", Path: "/leads/x"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for changed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if changed.Load() == 0 {
		t.Fatal("no notifications/tools/list_changed within 10s of a new action")
	}
	if after := len(toolNames(t, cs)); after != before+1 {
		t.Errorf("tools after the change = %d, want %d", after, before+1)
	}
}
