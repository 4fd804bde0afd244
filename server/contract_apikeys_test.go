package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

var bg = context.Background()

// createKey creates a key through the API and returns it with its secret.
func createKey(t *testing.T, c *client.ClientWithResponses, name string, scopes []client.Scope, expiresAt *time.Time) *client.APIKeyCreated {
	t.Helper()
	res, err := c.CreateAPIKeyWithResponse(bg, client.APIKeyCreate{Name: name, Scopes: scopes, ExpiresAt: expiresAt})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusCreated || res.JSON201 == nil {
		t.Fatalf("create key %q = %d %s, want 201", name, res.StatusCode(), res.Body)
	}
	return res.JSON201
}

func TestContractAPIKeyLifecycle(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)

	exp := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	res, err := admin.CreateAPIKeyWithResponse(bg, client.APIKeyCreate{Name: "billing", Scopes: []client.Scope{client.ScopeConnectorsRead, client.ScopeInvoke}, ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusCreated {
		t.Fatalf("create = %d %s", res.StatusCode(), res.Body)
	}
	if got := res.HTTPResponse.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store (the body holds a secret)", got)
	}
	k := res.JSON201
	if !strings.HasPrefix(k.Key, "sb_") || len(k.Key) != len("sb_")+43 {
		t.Errorf("key = %q, want sb_ + 43 base64url characters (256 bits)", k.Key)
	}
	if !strings.HasPrefix(k.Id, "key_") || strings.Contains(k.Id, k.Key[3:]) {
		t.Errorf("id = %q", k.Id)
	}
	if k.Prefix != k.Key[:7] || k.Name != "billing" || k.Version != 1 ||
		!slices.Equal(k.Scopes, []client.Scope{client.ScopeConnectorsRead, client.ScopeInvoke}) ||
		k.ExpiresAt == nil || !k.ExpiresAt.Equal(exp) || time.Since(k.CreatedAt) > time.Minute {
		t.Errorf("created key = %+v", k)
	}

	got, err := admin.GetAPIKeyWithResponse(bg, k.Id)
	if err != nil {
		t.Fatal(err)
	}
	if got.StatusCode() != http.StatusOK || got.JSON200.Id != k.Id || got.JSON200.Prefix != k.Prefix || !got.JSON200.CreatedAt.Equal(k.CreatedAt) {
		t.Fatalf("get = %d %s", got.StatusCode(), got.Body)
	}
	assertNoSecret(t, got.Body, k.Key)

	// The new key authenticates, with its own scopes only.
	own := env.ClientWithKey(t, k.Key)
	forbidden, err := own.ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if forbidden.StatusCode() != http.StatusForbidden || forbidden.JSON403 == nil {
		t.Fatalf("list with a connectors:read key = %d %s, want 403", forbidden.StatusCode(), forbidden.Body)
	}
	e := forbidden.JSON403.Error
	if e.Code != "forbidden" || e.Details == nil || fmt.Sprint((*e.Details)["requiredScopes"]) != "[admin]" {
		t.Errorf("403 error = %+v, want code forbidden with details.requiredScopes [admin]", e)
	}
	if h := forbidden.HTTPResponse.Header.Get("WWW-Authenticate"); !strings.Contains(h, `error="insufficient_scope"`) || !strings.Contains(h, `scope="admin"`) {
		t.Errorf("WWW-Authenticate = %q", h)
	}

	del, err := admin.DeleteAPIKeyWithResponse(bg, k.Id)
	if err != nil {
		t.Fatal(err)
	}
	if del.StatusCode() != http.StatusNoContent || len(del.Body) != 0 {
		t.Fatalf("delete = %d %s, want 204 without body", del.StatusCode(), del.Body)
	}
	// Revoked: refused at once, and gone.
	after, err := own.ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after.StatusCode() != http.StatusUnauthorized || after.JSON401.Error.Code != "unauthenticated" {
		t.Fatalf("request with a revoked key = %d %s, want 401", after.StatusCode(), after.Body)
	}
	for _, call := range []func() (int, error){
		func() (int, error) { r, err := admin.GetAPIKeyWithResponse(bg, k.Id); return r.StatusCode(), err },
		func() (int, error) { r, err := admin.DeleteAPIKeyWithResponse(bg, k.Id); return r.StatusCode(), err },
	} {
		status, err := call()
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusNotFound {
			t.Errorf("get/delete of a revoked key = %d, want 404", status)
		}
	}
}

func TestContractAPIKeyList(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)
	secrets := []string{env.AdminKey}
	for i := range 6 {
		secrets = append(secrets, createKey(t, admin, fmt.Sprintf("k%d", i), []client.Scope{client.ScopeLLM}, nil).Key)
		time.Sleep(2 * time.Millisecond) // ids sort by creation millisecond
	}
	var (
		names  []string
		cursor *string
		pages  int
	)
	for {
		limit := 3
		res, err := admin.ListAPIKeysWithResponse(bg, &client.ListAPIKeysParams{Limit: &limit, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != http.StatusOK {
			t.Fatalf("list = %d %s", res.StatusCode(), res.Body)
		}
		for _, s := range secrets {
			assertNoSecret(t, res.Body, s)
		}
		if strings.Contains(string(res.Body), `"hash"`) {
			t.Errorf("list shows a hash: %s", res.Body)
		}
		pages++
		for _, k := range res.JSON200.Data {
			names = append(names, k.Name)
		}
		if len(res.JSON200.Data) > limit {
			t.Fatalf("page of %d items with limit %d", len(res.JSON200.Data), limit)
		}
		if res.JSON200.NextCursor == nil {
			break
		}
		cursor = res.JSON200.NextCursor
	}
	want := []string{"test-admin", "k0", "k1", "k2", "k3", "k4", "k5"}
	if !slices.Equal(names, want) || pages != 3 {
		t.Errorf("paged names = %v in %d pages, want %v in 3 (creation order, no empty last page)", names, pages, want)
	}

	// Default page size holds them all.
	res, err := admin.ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.JSON200.Data) != 7 || res.JSON200.NextCursor != nil {
		t.Errorf("default list = %d items, nextCursor %v", len(res.JSON200.Data), res.JSON200.NextCursor)
	}
}

func TestContractAPIKeyUnauthenticated(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)
	expiring := createKey(t, admin, "expiring", []client.Scope{client.ScopeAdmin}, ptr(time.Now().Add(time.Hour)))
	revoked := createKey(t, admin, "revoked", []client.Scope{client.ScopeAdmin}, nil)
	if r, err := admin.DeleteAPIKeyWithResponse(bg, revoked.Id); err != nil || r.StatusCode() != http.StatusNoContent {
		t.Fatalf("revoke: %v %v", err, r.Status())
	}

	cases := []struct {
		name, header, wantMessage, wantChallenge string
		expire                                   bool
	}{
		{"missing", "", "missing Authorization header", `Bearer realm="switchboard"`, false},
		{"basic scheme", "Basic dXNlcjpwYXNz", "Bearer scheme", `error="invalid_request"`, false},
		{"empty bearer", "Bearer ", "Bearer scheme", `error="invalid_request"`, false},
		{"unknown sb key", "Bearer sb_" + strings.Repeat("A", 43), "unknown or revoked", `error="invalid_token"`, false},
		{"not a known credential kind", "Bearer not-a-key", "invalid credential", `error="invalid_token"`, false},
		{"revoked", "Bearer " + revoked.Key, "unknown or revoked", `error="invalid_token"`, false},
		{"expired", "Bearer " + expiring.Key, "expired", `error="invalid_token"`, true},
	}
	raw := env.HTTPClient(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.expire {
				// The key's expiry passes: move the server's clock past it.
				env.Server.Keys().Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
				t.Cleanup(func() { env.Server.Keys().Now = nil })
			}
			req, _ := http.NewRequest(http.MethodGet, env.URL+"/v1/api-keys", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			res, err := raw.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, res)
			if res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status = %d %s, want 401", res.StatusCode, body)
			}
			e := decodeError(t, body)
			if e.Code != "unauthenticated" || !strings.Contains(e.Message, tc.wantMessage) {
				t.Errorf("error = %+v, want unauthenticated mentioning %q", e, tc.wantMessage)
			}
			if h := res.Header.Get("WWW-Authenticate"); !strings.Contains(h, tc.wantChallenge) {
				t.Errorf("WWW-Authenticate = %q, want %q", h, tc.wantChallenge)
			}
			if tc.header != "" && strings.Contains(string(body), strings.TrimPrefix(tc.header, "Bearer ")) && len(tc.header) > 10 {
				t.Errorf("the credential is echoed in the error: %s", body)
			}
		})
	}
	// Sanity: the expiring key worked before its expiry.
	if r, err := env.ClientWithKey(t, expiring.Key).ListAPIKeysWithResponse(bg, nil); err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("unexpired key: %v %v", err, r.Status())
	}
}

func TestContractAPIKeyValidation(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)

	// Within the spec, refused by the server: an expiry in the past.
	past := time.Now().Add(-time.Minute)
	res, err := admin.CreateAPIKeyWithResponse(bg, client.APIKeyCreate{Name: "old", Scopes: []client.Scope{client.ScopeLLM}, ExpiresAt: &past})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusUnprocessableEntity || res.JSON422 == nil {
		t.Fatalf("past expiry = %d %s, want 422", res.StatusCode(), res.Body)
	}
	assertProblems(t, res.Body, "expiresAt")

	// Outside the spec: the server refuses what the client would not send.
	raw := env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())
	cases := []struct {
		name, body string
		status     int
		fields     []string
	}{
		{"empty name and no scopes", `{"name":"","scopes":[]}`, 422, []string{"name", "scopes"}},
		{"unknown and duplicate scopes", `{"name":"x","scopes":["llm","root","llm"]}`, 422, []string{"scopes[1]", "scopes[2]"}},
		{"name too long", `{"name":"` + strings.Repeat("n", 129) + `","scopes":["llm"]}`, 422, []string{"name"}},
		{"control character in name", `{"name":"a\u0007b","scopes":["llm"]}`, 422, []string{"name"}},
		{"missing scopes", `{"name":"x"}`, 422, []string{"scopes"}},
		{"scopes not a list", `{"name":"x","scopes":"admin"}`, 400, []string{"scopes"}},
		{"bad timestamp", `{"name":"x","scopes":["llm"],"expiresAt":"tomorrow"}`, 400, nil},
		{"unknown field", `{"name":"x","scopes":["llm"],"key":"sb_mine"}`, 400, []string{"key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, env.URL+"/v1/api-keys", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			res, err := raw.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, res)
			if res.StatusCode != tc.status {
				t.Fatalf("status = %d %s, want %d", res.StatusCode, body, tc.status)
			}
			assertProblems(t, body, tc.fields...)
		})
	}

	// limit outside 1-100.
	for _, limit := range []string{"0", "101", "-1", "ten"} {
		res, err := raw.Get(env.URL + "/v1/api-keys?limit=" + limit)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, res)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "limit") {
			t.Errorf("limit=%s: %d %s, want 400 naming limit", limit, res.StatusCode, body)
		}
	}

	// Nothing invalid was stored.
	list, err := admin.ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.JSON200.Data); n != 1 {
		t.Errorf("%d keys stored after refused creations, want 1 (the admin key)", n)
	}
}

func TestContractAPIKeyLastAdminCannotBeRevoked(t *testing.T) {
	env := servertest.New(t)
	admin := env.Client(t)
	list, err := admin.ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	adminID := list.JSON200.Data[0].Id

	// A non-admin key does not count as an administrator.
	createKey(t, admin, "reader", []client.Scope{client.ScopeConnectorsRead}, nil)
	res, err := admin.DeleteAPIKeyWithResponse(bg, adminID)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusConflict || res.JSON409 == nil || !strings.Contains(res.JSON409.Error.Message, "last admin key") {
		t.Fatalf("revoke last admin = %d %s, want 409", res.StatusCode(), res.Body)
	}

	// With a second admin, the first can go, and the second keeps working.
	second := createKey(t, admin, "admin-2", []client.Scope{client.ScopeAdmin}, nil)
	if res, err = admin.DeleteAPIKeyWithResponse(bg, adminID); err != nil || res.StatusCode() != http.StatusNoContent {
		t.Fatalf("revoke first admin with a second one = %v %s", err, res.Body)
	}
	if r, err := env.ClientWithKey(t, second.Key).GetAPIKeyWithResponse(bg, second.Id); err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("second admin: %v %v", err, r.Status())
	}
}

func TestContractAPIKeyNotFound(t *testing.T) {
	env := servertest.New(t)
	res, err := env.Client(t).GetAPIKeyWithResponse(bg, "key_nope")
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusNotFound || res.JSON404 == nil || res.JSON404.Error.Code != "not_found" || !strings.Contains(res.JSON404.Error.Message, "key_nope") {
		t.Fatalf("get unknown = %d %s, want 404 naming the id", res.StatusCode(), res.Body)
	}
}

// --- helpers shared by the server_test package ---

type wireError struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"requestId"`
	Details   map[string]any `json:"details"`
}

func decodeError(t *testing.T, body []byte) wireError {
	t.Helper()
	var e struct {
		Error wireError `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, body)
	}
	return e.Error
}

// assertProblems checks that an error's details.problems names each field.
func assertProblems(t *testing.T, body []byte, fields ...string) {
	t.Helper()
	e := decodeError(t, body)
	var got []string
	if ps, ok := e.Details["problems"].([]any); ok {
		for _, p := range ps {
			if m, ok := p.(map[string]any); ok {
				got = append(got, fmt.Sprint(m["field"]))
			}
		}
	}
	for _, f := range fields {
		if !slices.Contains(got, f) {
			t.Errorf("problems name %v, want %q among them: %s", got, f, body)
		}
	}
}

func assertNoSecret(t *testing.T, body []byte, secret string) {
	t.Helper()
	if secret != "" && strings.Contains(string(body), secret) {
		t.Errorf("response shows a secret: %s", body)
	}
}

func readAll(t *testing.T, res *http.Response) []byte {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ptr[T any](v T) *T { return &v }

// BenchmarkGetAPIKeyHTTP measures an authenticated GET through the whole
// middleware chain (request id, logging, body limit, API key lookup, scope
// check, rate limit) over loopback HTTP, without spec validation.
func BenchmarkGetAPIKeyHTTP(b *testing.B) {
	// The limiter stays on, with a limit the benchmark never reaches.
	env := servertest.New(b, func(c *config.Config) {
		c.Limits.RequestsPerMinute, c.Limits.ControlPlaneRequestsPerMinute = 1<<30, 1<<30
	})
	key := createKeyB(b, env)
	hc := env.HTTP.Client()
	url := env.URL + "/v1/api-keys/" + key
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer "+env.AdminKey)
			res, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Fatalf("status %d", res.StatusCode)
			}
		}
	})
}

func createKeyB(b *testing.B, env *servertest.Env) string {
	b.Helper()
	k, _, err := env.Server.Keys().Create(bg, auth.NewAPIKeyInput{Name: "bench", Scopes: []string{auth.ScopeLLM}})
	if err != nil {
		b.Fatal(err)
	}
	return k.ID
}
