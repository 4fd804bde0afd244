package servertest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// recorder captures the failures the validating transport reports.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}

func (r *recorder) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "\n")
}

// fake serves canned answers in place of the real server.
func fake(t *testing.T, h http.HandlerFunc) *servertest.Env {
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &servertest.Env{URL: hs.URL, HTTP: hs}
}

func answer(status int, contentType, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		if w.Header().Get("X-Request-Id") == "" && !slices.Contains(header, "X-Request-Id") {
			w.Header().Set("X-Request-Id", "rid")
		}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

const goodError = `{"error":{"code":"not_found","message":"no such route","requestId":"rid"}}`

func TestValidatingTransport(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		method  string
		path    string
		body    string
		opts    []servertest.TransportOption
		want    string // substring of the reported failure; "" = none
	}{
		{name: "conforming exchange", handler: answer(200, "application/json", `{"status":"ok"}`), method: "GET", path: "/healthz"},
		{name: "body does not match the schema", handler: answer(200, "application/json", `{"status":5}`), method: "GET", path: "/healthz", want: "does not match the spec"},
		{name: "required field missing", handler: answer(200, "application/json", `{}`), method: "GET", path: "/healthz", want: "does not match the spec"},
		{name: "undeclared status", handler: answer(418, "application/json", strings.Replace(goodError, "not_found", "teapot", 1)), method: "GET", path: "/healthz", want: "status is not supported"},
		{name: "undeclared content type", handler: answer(200, "text/plain", "ok"), method: "GET", path: "/healthz", want: "does not match the spec"},
		{name: "no request id", handler: answer(200, "application/json", `{"status":"ok"}`, "X-Request-Id", ""), method: "GET", path: "/healthz", want: "no X-Request-Id"},
		{name: "declared error in the native shape", handler: answer(503, "application/json", strings.Replace(goodError, "not_found", "unavailable", 1)), method: "GET", path: "/readyz"},
		{name: "declared error in another shape", handler: answer(503, "application/json", `{"message":"down"}`), method: "GET", path: "/readyz", want: "ErrorResponse"},
		{name: "error whose requestId differs", handler: answer(503, "application/json", strings.Replace(goodError, `"rid"`, `"other"`, 1)), method: "GET", path: "/readyz", want: "requestId"},
		{name: "unknown route, native error", handler: answer(404, "application/json", goodError), method: "GET", path: "/nowhere"},
		{name: "unknown route, text error", handler: answer(404, "text/plain", "404 page not found"), method: "GET", path: "/nowhere", want: "Content-Type"},
		{name: "unknown route answering success", handler: answer(200, "application/json", `{}`), method: "GET", path: "/nowhere", want: "not in the spec"},
		{name: "wrong method, native error", handler: answer(405, "application/json", strings.Replace(goodError, "not_found", "method_not_allowed", 1)), method: "DELETE", path: "/healthz"},
		{name: "request breaking the spec", handler: answer(422, "application/json", goodError), method: "POST", path: "/v1/api-keys", body: `{"name":"","scopes":["root"]}`, want: "request POST /v1/api-keys does not match the spec"},
		{name: "request breaking the spec, allowed", handler: answer(422, "application/json", goodError), method: "POST", path: "/v1/api-keys", body: `{"name":"","scopes":["root"]}`, opts: []servertest.TransportOption{servertest.AllowInvalidRequests()}},
		{name: "bad query parameter", handler: answer(400, "application/json", goodError), method: "GET", path: "/v1/api-keys?limit=1000", want: "does not match the spec"},
		{name: "secret-bearing create answer", handler: answer(201, "application/json", `{"id":"key_1","name":"n","scopes":["llm"],"prefix":"sb_abcd","createdAt":"2030-01-01T00:00:00Z","version":1}`), method: "POST", path: "/v1/api-keys", body: `{"name":"n","scopes":["llm"]}`, want: "key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := fake(t, tc.handler)
			rec := &recorder{TB: t}
			c := env.HTTPClient(rec, append([]servertest.TransportOption{servertest.WithKey("sb_test")}, tc.opts...)...)
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, _ := http.NewRequest(tc.method, env.URL+tc.path, body)
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			// The caller still reads the whole body after validation.
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode >= 200 && len(b) == 0 && tc.handler != nil && res.StatusCode != 204 {
				t.Errorf("response body lost after validation")
			}
			got := rec.failures()
			switch {
			case tc.want == "" && got != "":
				t.Errorf("unexpected failure: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("failure %q, want one mentioning %q", got, tc.want)
			}
		})
	}
}

func TestTransportSendsKeyAndKeepsBody(t *testing.T) {
	var gotAuth, gotBody string
	var gotLen int64
	env := fake(t, func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		b, _ := io.ReadAll(r.Body)
		gotBody, gotLen = string(b), r.ContentLength
		answer(422, "application/json", goodError)(w, r)
	})
	rec := &recorder{TB: t}
	c := env.HTTPClient(rec, servertest.WithKey("sb_k"), servertest.AllowInvalidRequests())
	req, _ := http.NewRequest("POST", env.URL+"/v1/api-keys", io.MultiReader(strings.NewReader(`{"name":`), strings.NewReader(`"x"}`)))
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if gotAuth != "Bearer sb_k" || gotBody != `{"name":"x"}` || gotLen != -1 {
		t.Errorf("server got auth %q body %q length %d; want the key, the whole body, still chunked", gotAuth, gotBody, gotLen)
	}
	// A request's own Authorization wins.
	req, _ = http.NewRequest("GET", env.URL+"/healthz", nil)
	req.Header.Set("Authorization", "Basic x")
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if gotAuth != "Basic x" {
		t.Errorf("Authorization = %q, want the request's own", gotAuth)
	}
}

func TestOtherHostsPassThrough(t *testing.T) {
	other := httptest.NewServer(answer(200, "text/plain", "not switchboard", "X-Request-Id", ""))
	defer other.Close()
	env := fake(t, answer(200, "application/json", `{"status":"ok"}`))
	rec := &recorder{TB: t}
	res, err := env.HTTPClient(rec).Get(other.URL + "/anything")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := rec.failures(); got != "" {
		t.Errorf("a request to another host was validated: %s", got)
	}
}

func TestCoverageRecording(t *testing.T) {
	isUnexercised := func(id string) bool {
		t.Helper()
		ops, err := servertest.Unexercised()
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(ops, func(o servertest.Operation) bool { return strings.EqualFold(o.ID, id) })
	}
	all, err := servertest.Operations()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(all, func(o servertest.Operation) bool {
		return strings.EqualFold(o.ID, "deleteAPIKey") && o.Method == "DELETE" && o.Path == "/v1/api-keys/{id}"
	}) {
		t.Fatalf("Operations() = %v lacks deleteAPIKey", all)
	}
	if !isUnexercised("deleteAPIKey") {
		t.Fatal("deleteAPIKey exercised before any call")
	}
	env := fake(t, answer(404, "application/json", goodError))
	rec := &recorder{TB: t}

	// An exchange with an invalid request does not count.
	req, _ := http.NewRequest("DELETE", env.URL+"/v1/api-keys/x", strings.NewReader("junk"))
	res, err := env.HTTPClient(rec, servertest.AllowInvalidRequests()).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if !isUnexercised("deleteAPIKey") {
		t.Error("an exchange made with AllowInvalidRequests counted as coverage")
	}

	// Through the generated client it counts, whatever the (declared) status.
	c, err := client.NewClientWithResponses(env.URL, client.WithHTTPClient(env.HTTPClient(rec)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteAPIKeyWithResponse(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if isUnexercised("deleteAPIKey") {
		t.Error("a validated exchange was not recorded")
	}
	if got := rec.failures(); got != "" {
		t.Errorf("unexpected failures: %s", got)
	}
}

// An encoded "/" stays inside one path parameter, as the server routes it.
func TestEncodedSlashRoutesLikeTheServer(t *testing.T) {
	var gotPath string
	env := fake(t, func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.EscapedPath()
		answer(404, "application/json", goodError)(w, r)
	})
	rec := &recorder{TB: t}
	c, err := client.NewClientWithResponses(env.URL, client.WithHTTPClient(env.HTTPClient(rec)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetAPIKeyWithResponse(context.Background(), "a/b"); err != nil {
		t.Fatal(err)
	}
	if gotPath != "/v1/api-keys/a%2Fb" {
		t.Errorf("server saw %s", gotPath)
	}
	if got := rec.failures(); got != "" {
		t.Errorf("an id with an encoded slash failed validation: %s", got)
	}
}
