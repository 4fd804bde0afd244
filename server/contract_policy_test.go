package server_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// policyEnv is a server with two providers serving a model of the same
// name ("openai" and "backup", both the fake OpenAI upstream), so that
// patterns on the provider and on the name can be told apart.
type policyEnv struct {
	*servertest.Env
	up    *fakeOpenAI
	admin *client.ClientWithResponses
}

func newPolicyEnv(t *testing.T) *policyEnv {
	t.Helper()
	up := newFakeOpenAI(t)
	model := func(name string, caps ...string) config.Model {
		return config.Model{Name: name, Capabilities: caps, MaxTokens: 128000, Pricing: &config.Pricing{Input: 0.15, Output: 0.60}}
	}
	// openai/limited always answers 429; its fallbacks are one model of
	// each provider.
	limited := model("limited", "chat")
	limited.Fallbacks = []string{"openai/gpt-4o-mini", "backup/gpt-4o-mini"}
	instruct := model("gpt-3.5-turbo-instruct", "completion")
	instruct.MaxTokens = 4096
	embed := config.Model{Name: "text-embedding-3-small", Capabilities: []string{"embeddings"}, Dimensions: 3}
	// backup/limited is an embedding model that answers 429 too.
	limitedEmbed := config.Model{Name: "limited", Capabilities: []string{"embeddings"}, Dimensions: 3,
		Fallbacks: []string{"openai/text-embedding-3-small", "backup/text-embedding-3-small"}}
	env := servertest.New(t, func(c *config.Config) {
		c.Providers = []config.Provider{
			{Name: "openai", Type: "openai", BaseURL: up.URL + "/v1", Timeout: config.Duration(5 * time.Second),
				Models: []config.Model{model("gpt-4o-mini", "chat", "code"), limited, instruct, embed}},
			{Name: "backup", Type: "openai", BaseURL: up.URL + "/v1", Timeout: config.Duration(5 * time.Second),
				Models: []config.Model{model("gpt-4o-mini", "chat"), embed, limitedEmbed}},
		}
	})
	return &policyEnv{Env: env, up: up, admin: env.Client(t)}
}

// key creates an API key (scopes llm and invoke) with the given policy
// lists (nil: absent) and returns it.
func (e *policyEnv) key(t *testing.T, models, connectors []string) *client.APIKeyCreated {
	t.Helper()
	in := client.APIKeyCreate{Name: "policy", Scopes: []client.Scope{client.ScopeLLM, client.ScopeInvoke}}
	if models != nil {
		in.Models = &models
	}
	if connectors != nil {
		in.Connectors = &connectors
	}
	res, err := e.admin.CreateAPIKeyWithResponse(bg, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.JSON201 == nil {
		t.Fatalf("create key = %d %s", res.StatusCode(), res.Body)
	}
	return res.JSON201
}

// exchange is one hand-made request's outcome.
type exchange struct {
	status int
	header http.Header
	body   []byte
}

// send makes a request with key over the validating transport.
func send(t *testing.T, h *http.Client, method, url, body string, header ...string) exchange {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(bg, method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return exchange{status: resp.StatusCode, header: resp.Header, body: b}
}

// nativeError decodes the native error shape.
type nativeError struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

// openAIError decodes OpenAI's error shape.
type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// wantModelRefused checks a native 403 for model.
func wantModelRefused(t *testing.T, x exchange, model string) {
	t.Helper()
	if x.status != http.StatusForbidden {
		t.Fatalf("status = %d %s, want 403", x.status, x.body)
	}
	e := decode[nativeError](t, x.body).Error
	if e.Code != "forbidden" || e.Details["model"] != model || e.Details["allowedModels"] == nil ||
		!strings.Contains(e.Message, "may not use model "+model) {
		t.Errorf("403 = %s, want code forbidden naming %s and the allowed models", x.body, model)
	}
}

// wantOpenAIModelRefused checks a 403 in OpenAI's shape.
func wantOpenAIModelRefused(t *testing.T, x exchange, model string) {
	t.Helper()
	if x.status != http.StatusForbidden {
		t.Fatalf("status = %d %s, want 403", x.status, x.body)
	}
	e := decode[openAIError](t, x.body).Error
	if e.Type != "permission_error" || e.Code == nil || *e.Code != "model_not_allowed" || e.Param == nil || *e.Param != "model" ||
		!strings.Contains(e.Message, model) {
		t.Errorf("403 = %s, want OpenAI's shape: type permission_error, code model_not_allowed, param model", x.body)
	}
}

func chatBody(model string, stream bool) string {
	b, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": "Hi"}}, "stream": stream})
	return string(b)
}

func TestContractPolicyModelRules(t *testing.T) {
	env := newPolicyEnv(t)
	tests := []struct {
		name    string
		models  []string
		allowed []string
		refused []string
	}{
		{"an exact id allows that model only", []string{"openai/gpt-4o-mini"},
			[]string{"openai/gpt-4o-mini"}, []string{"backup/gpt-4o-mini", "openai/limited"}},
		{"a provider pattern allows every model of the provider", []string{"openai/*"},
			[]string{"openai/gpt-4o-mini"}, []string{"backup/gpt-4o-mini"}},
		{"a name pattern allows the name at every provider", []string{"*/gpt-4o-mini"},
			[]string{"openai/gpt-4o-mini", "backup/gpt-4o-mini"}, []string{"openai/limited"}},
		{"several entries allow their union", []string{"backup/*", "openai/gpt-4o-*"},
			[]string{"openai/gpt-4o-mini", "backup/gpt-4o-mini"}, []string{"openai/limited"}},
		{"no models list allows every model", nil,
			[]string{"openai/gpt-4o-mini", "backup/gpt-4o-mini"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := env.HTTPClient(t, servertest.WithKey(env.key(t, tc.models, nil).Key))
			for _, m := range tc.allowed {
				if x := send(t, h, "POST", env.URL+"/v1/chat", chatBody(m, false)); x.status != http.StatusOK {
					t.Errorf("chat with %s = %d %s, want 200", m, x.status, x.body)
				}
			}
			for _, m := range tc.refused {
				wantModelRefused(t, send(t, h, "POST", env.URL+"/v1/chat", chatBody(m, false)), m)
			}
		})
	}
}

// TestContractPolicyModelEveryRoute checks that every model route refuses
// a model outside the policy before anything reaches the provider.
func TestContractPolicyModelEveryRoute(t *testing.T) {
	env := newPolicyEnv(t)
	h := env.HTTPClient(t, servertest.WithKey(env.key(t, []string{"backup/*"}, nil).Key))
	native := []struct{ name, path, body, model string }{
		{"generate", "/v1/generate", `{"model":"openai/gpt-3.5-turbo-instruct","prompt":"Hi"}`, "openai/gpt-3.5-turbo-instruct"},
		{"generate, streaming", "/v1/generate", `{"model":"openai/gpt-3.5-turbo-instruct","prompt":"Hi","stream":true}`, "openai/gpt-3.5-turbo-instruct"},
		{"chat", "/v1/chat", chatBody("openai/gpt-4o-mini", false), "openai/gpt-4o-mini"},
		{"chat, streaming", "/v1/chat", chatBody("openai/gpt-4o-mini", true), "openai/gpt-4o-mini"},
		{"generate with a bare name", "/v1/generate", `{"model":"gpt-3.5-turbo-instruct","prompt":"Hi"}`, "openai/gpt-3.5-turbo-instruct"},
		{"chat, refused before the body's other problems", "/v1/chat",
			`{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],"temperature":1.5,"maxTokens":999999}`, "openai/gpt-4o-mini"},
		{"embeddings", "/v1/embeddings", `{"model":"openai/text-embedding-3-small","text":"hi"}`, "openai/text-embedding-3-small"},
		{"embeddings, built-in local model", "/v1/embeddings", `{"model":"local/hash-embed-384","text":"hi"}`, "local/hash-embed-384"},
		{"function calling", "/v1/function-calling",
			`{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Weather in Paris?"}],"functions":[{"name":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]}`,
			"openai/gpt-4o-mini"},
		{"function calling, refused before the functions' problems", "/v1/function-calling",
			`{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],"functions":[{"name":"weather","parameters":{"type":"nonsense"}}]}`,
			"openai/gpt-4o-mini"},
	}
	for _, tc := range native {
		t.Run("native "+tc.name, func(t *testing.T) {
			before := env.up.requests.Load()
			x := send(t, h, "POST", env.URL+tc.path, tc.body)
			wantModelRefused(t, x, tc.model)
			if ct := x.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q, want a JSON error, not a stream", ct)
			}
			if n := env.up.requests.Load() - before; n != 0 {
				t.Errorf("the provider received %d requests, want none", n)
			}
		})
	}
	compat := []struct{ name, path, body, model string }{
		{"chat/completions", "/openai/v1/chat/completions", chatBody("openai/gpt-4o-mini", false), "openai/gpt-4o-mini"},
		{"chat/completions, streaming", "/openai/v1/chat/completions", chatBody("openai/gpt-4o-mini", true), "openai/gpt-4o-mini"},
		{"completions", "/openai/v1/completions", `{"model":"openai/gpt-3.5-turbo-instruct","prompt":"Hi"}`, "openai/gpt-3.5-turbo-instruct"},
		{"completions, streaming", "/openai/v1/completions", `{"model":"openai/gpt-3.5-turbo-instruct","prompt":"Hi","stream":true}`, "openai/gpt-3.5-turbo-instruct"},
		{"embeddings", "/openai/v1/embeddings", `{"model":"openai/text-embedding-3-small","input":"hi"}`, "openai/text-embedding-3-small"},
	}
	for _, tc := range compat {
		t.Run("openai "+tc.name, func(t *testing.T) {
			before := env.up.requests.Load()
			wantOpenAIModelRefused(t, send(t, h, "POST", env.URL+tc.path, tc.body), tc.model)
			if n := env.up.requests.Load() - before; n != 0 {
				t.Errorf("the provider received %d requests, want none", n)
			}
		})
	}
	t.Run("the OpenAI SDK sees a PermissionDenied error", func(t *testing.T) {
		c := sdk(t, env.Env, env.key(t, []string{"backup/*"}, nil).Key)
		_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "openai/gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}})
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != http.StatusForbidden || e.Type != "permission_error" || e.Param != "model" {
			t.Fatalf("err = %v, want a 403 permission_error on param model", err)
		}
	})
	t.Run("allowed models still answer on every route", func(t *testing.T) {
		for _, c := range []struct{ path, body string }{
			{"/v1/chat", chatBody("backup/gpt-4o-mini", false)},
			{"/v1/embeddings", `{"model":"backup/text-embedding-3-small","text":"hi"}`},
			{"/openai/v1/chat/completions", chatBody("backup/gpt-4o-mini", false)},
			{"/openai/v1/embeddings", `{"model":"backup/text-embedding-3-small","input":"hi"}`},
		} {
			if x := send(t, h, "POST", env.URL+c.path, c.body); x.status != http.StatusOK {
				t.Errorf("%s = %d %s, want 200", c.path, x.status, x.body)
			}
		}
		x := send(t, h, "POST", env.URL+"/v1/chat", chatBody("backup/gpt-4o-mini", true))
		if x.status != http.StatusOK || !strings.HasPrefix(x.header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("stream = %d %s, want 200 text/event-stream", x.status, x.body)
		}
	})
}

func TestContractPolicyFallbackOutsidePolicyIsSkipped(t *testing.T) {
	env := newPolicyEnv(t)
	tests := []struct {
		name   string
		models []string // nil: no policy
		path   string
		body   string
		want   string // the model that answers; "" for the upstream's 429
	}{
		{"without a policy the first fallback answers", nil,
			"/v1/chat", chatBody("openai/limited", false), "openai/gpt-4o-mini"},
		{"a fallback outside the policy is skipped for the next one", []string{"openai/limited", "backup/*"},
			"/v1/chat", chatBody("openai/limited", false), "backup/gpt-4o-mini"},
		{"a stream skips it too", []string{"openai/limited", "backup/*"},
			"/openai/v1/chat/completions", chatBody("openai/limited", true), "backup/gpt-4o-mini"},
		{"with no fallback allowed the upstream's error comes back", []string{"openai/limited"},
			"/v1/chat", chatBody("openai/limited", false), ""},
		{"embeddings skip it", []string{"backup/*"},
			"/v1/embeddings", `{"model":"backup/limited","text":"hi"}`, "backup/text-embedding-3-small"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := env.HTTPClient(t, servertest.WithKey(env.AdminKey))
			if tc.models != nil {
				h = env.HTTPClient(t, servertest.WithKey(env.key(t, tc.models, nil).Key))
			}
			x := send(t, h, "POST", env.URL+tc.path, tc.body)
			if tc.want == "" {
				if x.status != http.StatusTooManyRequests {
					t.Fatalf("status = %d %s, want the upstream's 429", x.status, x.body)
				}
				return
			}
			if x.status != http.StatusOK {
				t.Fatalf("status = %d %s, want 200", x.status, x.body)
			}
			if !strings.Contains(string(x.body), `"model":"`+tc.want+`"`) {
				t.Errorf("answer %s, want it from %s", x.body, tc.want)
			}
		})
	}
}

func TestContractPolicyModelListings(t *testing.T) {
	env := newPolicyEnv(t)
	ids := func(t *testing.T, h *http.Client, path string) []string {
		t.Helper()
		x := send(t, h, "GET", env.URL+path, "")
		if x.status != http.StatusOK {
			t.Fatalf("%s = %d %s", path, x.status, x.body)
		}
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(x.body, &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range list.Data {
			out = append(out, m.ID)
		}
		slices.Sort(out)
		return out
	}
	h := env.HTTPClient(t, servertest.WithKey(env.key(t, []string{"backup/*", "openai/gpt-4o-mini"}, nil).Key))
	want := []string{"backup/gpt-4o-mini", "backup/limited", "backup/text-embedding-3-small", "openai/gpt-4o-mini"}
	t.Run("the native list holds only allowed models", func(t *testing.T) {
		if got := ids(t, h, "/v1/models"); !slices.Equal(got, want) {
			t.Errorf("models = %v, want %v", got, want)
		}
		if got := ids(t, h, "/v1/models?provider=openai"); !slices.Equal(got, []string{"openai/gpt-4o-mini"}) {
			t.Errorf("openai models = %v", got)
		}
	})
	t.Run("the OpenAI list holds only allowed models", func(t *testing.T) {
		if got := ids(t, h, "/openai/v1/models"); !slices.Equal(got, want) {
			t.Errorf("models = %v, want %v", got, want)
		}
	})
	t.Run("a key without a models list sees every model", func(t *testing.T) {
		all := ids(t, env.HTTPClient(t, servertest.WithKey(env.AdminKey)), "/v1/models")
		if len(all) != 8 || !slices.Contains(all, "local/hash-embed-384") {
			t.Errorf("admin sees %v, want all 8 models", all)
		}
	})
	t.Run("one model outside the policy is 403", func(t *testing.T) {
		wantModelRefused(t, send(t, h, "GET", env.URL+"/v1/models/openai/limited", ""), "openai/limited")
		wantModelRefused(t, send(t, h, "GET", env.URL+"/v1/models/openai%2Flimited", ""), "openai/limited")
		wantOpenAIModelRefused(t, send(t, h, "GET", env.URL+"/openai/v1/models/openai/limited", ""), "openai/limited")
		wantOpenAIModelRefused(t, send(t, h, "GET", env.URL+"/openai/v1/models/gpt-3.5-turbo-instruct", ""), "openai/gpt-3.5-turbo-instruct")
	})
	t.Run("one model inside the policy is shown", func(t *testing.T) {
		for _, p := range []string{"/v1/models/backup/limited", "/v1/models/openai%2Fgpt-4o-mini", "/openai/v1/models/backup/limited"} {
			if x := send(t, h, "GET", env.URL+p, ""); x.status != http.StatusOK {
				t.Errorf("%s = %d %s", p, x.status, x.body)
			}
		}
	})
	t.Run("an unknown model stays 404", func(t *testing.T) {
		if x := send(t, h, "GET", env.URL+"/v1/models/backup/nope", ""); x.status != http.StatusNotFound {
			t.Errorf("= %d %s", x.status, x.body)
		}
	})
}

func TestContractPolicyConnectors(t *testing.T) {
	e := newIEnv(t)
	up := newUpstream(t, echo)
	none := connectors.Auth{Type: connectors.AuthNone}
	e.connector(connectors.Connector{Name: "weather", BaseURL: up.URL, Auth: none}, getAction("forecast", "/forecast", nil), getAction("alerts", "/alerts", nil))
	e.connector(connectors.Connector{Name: "crm", BaseURL: up.URL, Auth: none}, getAction("list", "/list", nil))
	penv := &policyEnv{Env: e.Env, admin: e.admin}
	type run struct{ connector, action string }
	tests := []struct {
		name       string
		connectors []string
		allowed    []run
		refused    []run
		notFound   []run
	}{
		{"a connector name allows all its actions", []string{"weather"},
			[]run{{"weather", "forecast"}, {"weather", "alerts"}}, []run{{"crm", "list"}}, []run{{"weather", "nope"}}},
		{"a connector.action pair allows that action only", []string{"weather.forecast"},
			[]run{{"weather", "forecast"}}, []run{{"weather", "alerts"}, {"crm", "list"}, {"weather", "nope"}}, nil},
		{"names and pairs combine", []string{"weather.alerts", "crm"},
			[]run{{"weather", "alerts"}, {"crm", "list"}}, []run{{"weather", "forecast"}, {"nope", "list"}}, nil},
		{"no connectors list allows every action", nil,
			[]run{{"weather", "forecast"}, {"weather", "alerts"}, {"crm", "list"}}, nil, []run{{"nope", "list"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := client.New(e.URL, penv.key(t, []string{"openai/*"}, tc.connectors).Key, client.WithHTTPClient(e.HTTPClient(t)))
			if err != nil {
				t.Fatal(err)
			}
			do := func(r run) *client.APIError {
				_, err := sb.Integrations(r.connector).Run(bg, r.action, nil)
				var ae *client.APIError
				if err != nil && !errors.As(err, &ae) {
					t.Fatalf("run %s.%s: %v", r.connector, r.action, err)
				}
				return ae
			}
			for _, r := range tc.allowed {
				if ae := do(r); ae != nil {
					t.Errorf("run %s.%s = %v, want it to run", r.connector, r.action, ae)
				}
			}
			for _, r := range tc.refused {
				before := len(up.requests())
				ae := do(r)
				wantAPIError(t, ae, http.StatusForbidden, "forbidden", "may not run "+r.connector+"."+r.action)
				if ae.Details["connector"] != r.connector || ae.Details["action"] != r.action || ae.Details["allowedConnectors"] == nil {
					t.Errorf("details = %v, want connector, action and allowedConnectors", ae.Details)
				}
				if n := len(up.requests()) - before; n != 0 {
					t.Errorf("the upstream received %d requests, want none", n)
				}
			}
			for _, r := range tc.notFound {
				wantAPIError(t, do(r), http.StatusNotFound, "not_found")
			}
		})
	}
	t.Run("a changed connectors list applies to the next run", func(t *testing.T) {
		k := penv.key(t, nil, []string{"crm"})
		sb, err := client.New(e.URL, k.Key, client.WithHTTPClient(e.HTTPClient(t)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Integrations("weather").Run(bg, "forecast", nil); err == nil {
			t.Fatal("weather.forecast ran, want 403")
		}
		cs := []string{"weather.forecast"}
		res, err := e.admin.UpdateAPIKeyWithResponse(bg, k.Id, nil, client.APIKeyUpdate{Name: k.Name, Connectors: &cs})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("update: %v %s", err, res.Body)
		}
		if _, err := sb.Integrations("weather").Run(bg, "forecast", nil); err != nil {
			t.Errorf("weather.forecast after the update: %v", err)
		}
		_, err = sb.Integrations("crm").Run(bg, "list", nil)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusForbidden {
			t.Errorf("crm.list after the update = %v, want 403", err)
		}
	})
}

// problemFields lists the fields of a 422's details.problems.
func problemFields(t *testing.T, x exchange) []string {
	t.Helper()
	if x.status != http.StatusUnprocessableEntity {
		t.Fatalf("status = %d %s, want 422", x.status, x.body)
	}
	e := decode[nativeError](t, x.body).Error
	ps, _ := e.Details["problems"].([]any)
	var out []string
	for _, p := range ps {
		if m, ok := p.(map[string]any); ok {
			out = append(out, m["field"].(string))
		}
	}
	return out
}

// wantUnknownScopes checks the answer to an update body carrying scopes:
// an unknown field, 400 invalid_request naming it as every route answers.
func wantUnknownScopes(t *testing.T, x exchange) {
	t.Helper()
	e := decode[nativeError](t, x.body).Error
	if x.status != http.StatusBadRequest || e.Code != "invalid_request" || !strings.Contains(e.Message, `unknown field "scopes"`) {
		t.Errorf("= %d %s, want 400 invalid_request naming scopes", x.status, x.body)
	}
}

// badPolicyBodies are update bodies with an invalid policy, and the
// fields their 422 must name.
var badPolicyBodies = []struct {
	name, body string
	fields     []string
}{
	{"an empty models list", `{"name":"x","models":[]}`, []string{"models"}},
	{"a duplicate model", `{"name":"x","models":["openai/*","backup/*","openai/*"]}`, []string{"models[2]"}},
	{"a model pattern of wildcards only", `{"name":"x","models":["**"]}`, []string{"models[0]"}},
	{"a model with a space", `{"name":"x","models":["openai/gpt 4"]}`, []string{"models[0]"}},
	{"an empty connectors list", `{"name":"x","connectors":[]}`, []string{"connectors"}},
	{"a connector in upper case", `{"name":"x","connectors":["GitHub"]}`, []string{"connectors[0]"}},
	{"a connector entry with two dots", `{"name":"x","connectors":["github.issues.list"]}`, []string{"connectors[0]"}},
	{"a duplicate connector", `{"name":"x","connectors":["github","github"]}`, []string{"connectors[1]"}},
	{"alertAt not ascending", `{"name":"x","budget":{"usd":10,"period":"month","alertAt":[0.8,0.5]}}`, []string{"budget.alertAt[1]"}},
	{"alertAt out of range", `{"name":"x","budget":{"usd":10,"period":"week","alertAt":[1.5]}}`, []string{"budget.alertAt[0]"}},
	{"a budget of 0 over an unknown period", `{"name":"x","budget":{"usd":0,"period":"year"}}`, []string{"budget.usd", "budget.period"}},
	{"every problem at once", `{"name":"x","models":[],"connectors":["a.b.c"],"budget":{"usd":-1,"period":"day"}}`,
		[]string{"models", "connectors[0]", "budget.usd"}},
}

func TestContractAPIKeyPolicyUpdateInPlace(t *testing.T) {
	env := newPolicyEnv(t)
	k := env.key(t, []string{"openai/gpt-4o-mini"}, nil)
	h := env.HTTPClient(t, servertest.WithKey(k.Key))
	loose := env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())
	url := env.URL + "/v1/api-keys/" + k.Id
	wantModelRefused(t, send(t, h, "POST", env.URL+"/v1/chat", chatBody("backup/gpt-4o-mini", false)), "backup/gpt-4o-mini")

	got, err := env.admin.GetAPIKeyWithResponse(bg, k.Id)
	if err != nil || got.JSON200 == nil {
		t.Fatalf("get: %v %s", err, got.Body)
	}
	if tag := got.HTTPResponse.Header.Get("ETag"); tag != `"1"` {
		t.Fatalf("ETag = %q, want \"1\"", tag)
	}

	t.Run("PUT changes name and policy in place, version grows", func(t *testing.T) {
		models := []string{"backup/*"}
		rpm := 100
		res, err := env.admin.UpdateAPIKeyWithResponse(bg, k.Id, &client.UpdateAPIKeyParams{IfMatch: ptr(`"1"`)}, client.APIKeyUpdate{
			Name: "renamed", Models: &models, RateLimit: &client.RateLimitOverride{RequestsPerMinute: &rpm},
			Budget: &client.Budget{Usd: 5, Period: client.BudgetPeriodMonth, AlertAt: &[]float64{0.5, 0.8}},
		})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("update: %v %d %s", err, res.StatusCode(), res.Body)
		}
		u := res.JSON200
		if u.Id != k.Id || u.Prefix != k.Prefix || u.Name != "renamed" || u.Version != 2 || u.Models == nil || !slices.Equal(*u.Models, models) ||
			u.Budget == nil || u.Budget.Usd != 5 || u.RateLimit == nil || *u.RateLimit.RequestsPerMinute != 100 ||
			!slices.Equal(u.Scopes, k.Scopes) || !u.CreatedAt.Equal(k.CreatedAt) {
			t.Errorf("updated key %s", res.Body)
		}
		if tag := res.HTTPResponse.Header.Get("ETag"); tag != `"2"` {
			t.Errorf("ETag = %q, want \"2\"", tag)
		}
		assertNoSecret(t, res.Body, k.Key)
	})
	t.Run("the same secret follows the new policy on the next request", func(t *testing.T) {
		if x := send(t, h, "POST", env.URL+"/v1/chat", chatBody("backup/gpt-4o-mini", false)); x.status != http.StatusOK {
			t.Errorf("backup model = %d %s, want 200", x.status, x.body)
		}
		wantModelRefused(t, send(t, h, "POST", env.URL+"/v1/chat", chatBody("openai/gpt-4o-mini", false)), "openai/gpt-4o-mini")
	})
	t.Run("a stale If-Match is 412 and changes nothing", func(t *testing.T) {
		x := send(t, env.HTTPClient(t, servertest.WithKey(env.AdminKey)), "PUT", url, `{"name":"stale"}`, "If-Match", `"1"`)
		if x.status != http.StatusPreconditionFailed || decode[nativeError](t, x.body).Error.Code != "precondition_failed" {
			t.Fatalf("= %d %s, want 412 precondition_failed", x.status, x.body)
		}
		if g, _ := env.admin.GetAPIKeyWithResponse(bg, k.Id); g.JSON200.Version != 2 || g.JSON200.Name != "renamed" {
			t.Errorf("after a 412 the key is %s", g.Body)
		}
	})
	for _, tc := range badPolicyBodies {
		t.Run("422 for "+tc.name, func(t *testing.T) {
			if got := problemFields(t, send(t, loose, "PUT", url, tc.body)); !slices.Equal(got, tc.fields) {
				t.Errorf("problems on %v, want %v", got, tc.fields)
			}
		})
	}
	t.Run("scopes cannot change: an unknown field is 400 naming it", func(t *testing.T) {
		wantUnknownScopes(t, send(t, loose, "PUT", url, `{"name":"x","scopes":["admin"]}`))
		if g, _ := env.admin.GetAPIKeyWithResponse(bg, k.Id); g.JSON200.Version != 2 || slices.Contains(g.JSON200.Scopes, client.ScopeAdmin) {
			t.Errorf("after a refused update the key is %s", g.Body)
		}
	})
	t.Run("a field left out is removed", func(t *testing.T) {
		res, err := env.admin.UpdateAPIKeyWithResponse(bg, k.Id, &client.UpdateAPIKeyParams{IfMatch: ptr(`"2"`)}, client.APIKeyUpdate{Name: "renamed"})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("update: %v %s", err, res.Body)
		}
		if u := res.JSON200; u.Version != 3 || u.Models != nil || u.Budget != nil || u.RateLimit != nil {
			t.Errorf("updated key %s, want version 3 without a policy", res.Body)
		}
		if x := send(t, h, "POST", env.URL+"/v1/chat", chatBody("openai/gpt-4o-mini", false)); x.status != http.StatusOK {
			t.Errorf("any model = %d %s, want 200", x.status, x.body)
		}
	})
	t.Run("an unknown key is 404", func(t *testing.T) {
		res, err := env.admin.UpdateAPIKeyWithResponse(bg, "key_0192a1b2c3d4e5f60718293a4b5c6d7e", nil, client.APIKeyUpdate{Name: "x"})
		if err != nil || res.StatusCode() != http.StatusNotFound {
			t.Errorf("= %v %d %s, want 404", err, res.StatusCode(), res.Body)
		}
	})
	t.Run("api_key.updated is recorded for each change, without the secret", func(t *testing.T) {
		typ := client.EventType("api_key.updated")
		res, err := env.admin.ListEventsWithResponse(bg, &client.ListEventsParams{Type: &typ})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("events: %v %s", err, res.Body)
		}
		var versions []float64
		for _, ev := range res.JSON200.Data {
			if ev.Data["id"] == k.Id {
				versions = append(versions, ev.Data["version"].(float64))
			}
		}
		if !slices.Equal(versions, []float64{3, 2}) {
			t.Errorf("api_key.updated versions %v, want [3 2] (newest first)", versions)
		}
		assertNoSecret(t, res.Body, k.Key)
	})
}

func TestContractOAuthClientPolicyUpdateInPlace(t *testing.T) {
	env := newPolicyEnv(t)
	models := []string{"openai/gpt-4o-mini"}
	cr, err := env.admin.CreateOAuthClientWithResponse(bg, client.OAuthClientCreate{Name: "app", Scopes: []client.Scope{client.ScopeLLM}, Models: &models})
	if err != nil || cr.JSON201 == nil {
		t.Fatalf("create: %v %s", err, cr.Body)
	}
	oc := cr.JSON201
	tok := issueToken(t, env.Env, oc.Id, oc.ClientSecret, nil)
	h := env.HTTPClient(t, servertest.WithKey(tok.AccessToken))
	loose := env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())
	url := env.URL + "/v1/oauth-clients/" + oc.Id
	wantModelRefused(t, send(t, h, "POST", env.URL+"/v1/chat", chatBody("backup/gpt-4o-mini", false)), "backup/gpt-4o-mini")

	t.Run("PUT changes the policy in place, version grows", func(t *testing.T) {
		next := []string{"backup/*"}
		res, err := env.admin.UpdateOAuthClientWithResponse(bg, oc.Id, &client.UpdateOAuthClientParams{IfMatch: ptr(`"1"`)}, client.OAuthClientUpdate{Name: "app", Models: &next})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("update: %v %d %s", err, res.StatusCode(), res.Body)
		}
		if u := res.JSON200; u.Version != 2 || u.Models == nil || !slices.Equal(*u.Models, next) || res.HTTPResponse.Header.Get("ETag") != `"2"` {
			t.Errorf("updated client %s (ETag %q)", res.Body, res.HTTPResponse.Header.Get("ETag"))
		}
		assertNoSecret(t, res.Body, oc.ClientSecret)
	})
	t.Run("a token issued before the change follows the new policy", func(t *testing.T) {
		if x := send(t, h, "POST", env.URL+"/v1/chat", chatBody("backup/gpt-4o-mini", false)); x.status != http.StatusOK {
			t.Errorf("backup model = %d %s, want 200", x.status, x.body)
		}
		wantModelRefused(t, send(t, h, "POST", env.URL+"/v1/chat", chatBody("openai/gpt-4o-mini", false)), "openai/gpt-4o-mini")
	})
	t.Run("the same client secret still issues tokens", func(t *testing.T) {
		fresh := issueToken(t, env.Env, oc.Id, oc.ClientSecret, nil)
		x := send(t, env.HTTPClient(t, servertest.WithKey(fresh.AccessToken)), "POST", env.URL+"/v1/chat", chatBody("backup/gpt-4o-mini", false))
		if x.status != http.StatusOK {
			t.Errorf("= %d %s, want 200", x.status, x.body)
		}
	})
	t.Run("a stale If-Match is 412", func(t *testing.T) {
		x := send(t, env.HTTPClient(t, servertest.WithKey(env.AdminKey)), "PUT", url, `{"name":"stale"}`, "If-Match", `"1"`)
		if x.status != http.StatusPreconditionFailed {
			t.Errorf("= %d %s, want 412", x.status, x.body)
		}
	})
	for _, tc := range badPolicyBodies {
		t.Run("422 for "+tc.name, func(t *testing.T) {
			if got := problemFields(t, send(t, loose, "PUT", url, tc.body)); !slices.Equal(got, tc.fields) {
				t.Errorf("problems on %v, want %v", got, tc.fields)
			}
		})
	}
	t.Run("scopes cannot change: an unknown field is 400 naming it", func(t *testing.T) {
		wantUnknownScopes(t, send(t, loose, "PUT", url, `{"name":"x","scopes":["admin"]}`))
	})
	t.Run("an unknown client is 404", func(t *testing.T) {
		res, err := env.admin.UpdateOAuthClientWithResponse(bg, "oc_0192a1b2c3d4e5f60718293a4b5c6d7e", nil, client.OAuthClientUpdate{Name: "x"})
		if err != nil || res.StatusCode() != http.StatusNotFound {
			t.Errorf("= %v %d %s, want 404", err, res.StatusCode(), res.Body)
		}
	})
}
