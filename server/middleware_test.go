package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// chunked hides a reader's length so that the body is sent chunked,
// without Content-Length.
type chunked struct{ io.Reader }

func TestErrorsAndHygiene(t *testing.T) {
	const limit = 1024
	env := servertest.New(t, func(c *config.Config) { c.Limits.BodyBytes = limit })
	raw := env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())

	// A JSON body of exactly n bytes that is valid but refused by the domain
	// (its name is too long), so a 422 shows the size check let it through.
	sized := func(n int) string {
		head, tail := `{"scopes":["llm"],"name":"`, `"}`
		return head + strings.Repeat("n", n-len(head)-len(tail)) + tail
	}
	cases := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        io.Reader
		status      int
		code        string
		message     []string // substrings of error.message
		header      map[string]string
	}{
		{name: "unknown route", method: "GET", path: "/v1/nope", status: 404, code: "not_found"},
		{name: "unknown route outside /v1", method: "GET", path: "/nope", status: 404, code: "not_found"},
		{name: "wrong method", method: "PATCH", path: "/v1/api-keys", contentType: "application/json", body: strings.NewReader("{}"), status: 405, code: "method_not_allowed", header: map[string]string{"Allow": "GET"}},
		{name: "wrong method on a probe", method: "POST", path: "/healthz", status: 405, code: "method_not_allowed"},
		{name: "body at the limit passes", method: "POST", path: "/v1/api-keys", contentType: "application/json", body: strings.NewReader(sized(limit)), status: 422, code: "validation_failed"},
		{name: "body over the limit", method: "POST", path: "/v1/api-keys", contentType: "application/json", body: strings.NewReader(sized(limit + 1)), status: 413, code: "too_large", message: []string{"1024 bytes", "limits.bodyBytes"}},
		{name: "chunked body at the limit passes", method: "POST", path: "/v1/api-keys", contentType: "application/json", body: chunked{strings.NewReader(sized(limit))}, status: 422, code: "validation_failed"},
		{name: "chunked body over the limit", method: "POST", path: "/v1/api-keys", contentType: "application/json", body: chunked{strings.NewReader(sized(4 * limit))}, status: 413, code: "too_large", message: []string{"limits.bodyBytes"}},
		{name: "text body", method: "POST", path: "/v1/api-keys", contentType: "text/plain", body: strings.NewReader("name=x"), status: 415, code: "unsupported_media", message: []string{"application/json", "text/plain"}},
		{name: "form body", method: "POST", path: "/v1/api-keys", contentType: "application/x-www-form-urlencoded", body: strings.NewReader("name=x&scopes=llm"), status: 415, code: "unsupported_media"},
		{name: "xml body", method: "POST", path: "/v1/api-keys", contentType: "application/xml", body: strings.NewReader("<key><name>x</name></key>"), status: 415, code: "unsupported_media"},
		{name: "no content type", method: "POST", path: "/v1/api-keys", body: strings.NewReader(`{"name":"x","scopes":["llm"]}`), status: 415, code: "unsupported_media", message: []string{"no Content-Type"}},
		{name: "json with charset", method: "POST", path: "/v1/api-keys", contentType: "application/json; charset=utf-8", body: strings.NewReader(`{"name":"x","scopes":["llm"]}`), status: 201},
		{name: "empty body", method: "POST", path: "/v1/api-keys", contentType: "application/json", body: http.NoBody, status: 400, code: "invalid_request", message: []string{"empty"}},
		{name: "malformed JSON", method: "POST", path: "/v1/api-keys", contentType: "application/json", body: strings.NewReader(`{"name" "x"}`), status: 400, code: "invalid_request", message: []string{"malformed JSON", "offset 9"}},
		{name: "truncated JSON", method: "POST", path: "/v1/api-keys", contentType: "application/json", body: strings.NewReader(`{"name":"x",`), status: 400, code: "invalid_request", message: []string{"unexpected end", "offset"}},
		{name: "trailing data", method: "POST", path: "/v1/api-keys", contentType: "application/json", body: strings.NewReader(`{"name":"x","scopes":["llm"]} {}`), status: 400, code: "invalid_request", message: []string{"after the top-level value"}},
		{name: "unknown field", method: "POST", path: "/v1/api-keys", contentType: "application/json", body: strings.NewReader(`{"name":"x","scopes":["llm"],"owner":"me"}`), status: 400, code: "invalid_request", message: []string{`unknown field "owner"`}},
		{name: "wrong type", method: "POST", path: "/v1/api-keys", contentType: "application/json", body: strings.NewReader(`{"name":5,"scopes":["llm"]}`), status: 400, code: "invalid_request", message: []string{"name", "string"}},
		{name: "not an object", method: "POST", path: "/v1/api-keys", contentType: "application/json", body: strings.NewReader(`[1,2]`), status: 400, code: "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, env.URL+tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			if _, ok := tc.body.(chunked); ok && req.ContentLength != -1 && req.ContentLength != 0 {
				t.Fatalf("chunked body has a Content-Length %d", req.ContentLength)
			}
			res, err := raw.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, res)
			if res.StatusCode != tc.status {
				t.Fatalf("%s %s = %d %s, want %d", tc.method, tc.path, res.StatusCode, body, tc.status)
			}
			if tc.code != "" {
				e := decodeError(t, body)
				if e.Code != tc.code {
					t.Errorf("code = %q, want %q (%s)", e.Code, tc.code, body)
				}
				for _, m := range tc.message {
					if !strings.Contains(e.Message, m) {
						t.Errorf("message %q does not mention %q", e.Message, m)
					}
				}
			}
			for k, v := range tc.header {
				if !strings.Contains(res.Header.Get(k), v) {
					t.Errorf("%s = %q, want it to contain %q", k, res.Header.Get(k), v)
				}
			}
		})
	}
}

func TestDefaultBodyLimitIsOneMiB(t *testing.T) {
	env := servertest.New(t)
	if env.Config.Limits.BodyBytes != 1<<20 {
		t.Fatalf("default limits.bodyBytes = %d, want 1 MiB", env.Config.Limits.BodyBytes)
	}
	raw := env.HTTPClient(t, servertest.WithKey(env.AdminKey), servertest.AllowInvalidRequests())
	for _, body := range []io.Reader{
		bytes.NewReader(make([]byte, 1<<20+1)),
		chunked{io.MultiReader(strings.NewReader(`{"name":"`), strings.NewReader(strings.Repeat("x", 1<<20)))},
	} {
		req, _ := http.NewRequest("POST", env.URL+"/v1/api-keys", body)
		req.Header.Set("Content-Type", "application/json")
		res, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := readAll(t, res)
		if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "1048576") {
			t.Errorf("body of 1 MiB + 1 = %d %s, want 413 naming 1048576", res.StatusCode, b)
		}
	}
}

func TestRequestID(t *testing.T) {
	env := servertest.New(t)
	raw := env.HTTPClient(t)
	generated := regexp.MustCompile(`^[0-9a-f]{32}$`)
	cases := []struct {
		name, sent string
		honoured   bool
	}{
		{"none sent", "", false},
		{"well-formed", "req-42.a_b:c", true},
		{"uuid", "6f1c1f4e-8a51-4c9e-9a55-0b7f3c3f2d10", true},
		{"with spaces", "two words", false},
		{"too long", strings.Repeat("a", 129), false},
		{"tab", "abc\tdef", false},
		{"non-ASCII", "r\u00e9q", false},
		{"html", "<script>", false},
	}
	for _, tc := range cases {
		for _, path := range []string{"/healthz", "/v1/api-keys", "/v1/nope"} { // success, 401, 404
			t.Run(tc.name+" "+path, func(t *testing.T) {
				req, _ := http.NewRequest("GET", env.URL+path, nil)
				if tc.sent != "" {
					req.Header["X-Request-Id"] = []string{tc.sent}
				}
				res, err := raw.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				readAll(t, res)
				got := res.Header.Get("X-Request-Id")
				switch {
				case tc.honoured && got != tc.sent:
					t.Errorf("X-Request-Id = %q, want the caller's %q", got, tc.sent)
				case !tc.honoured && !generated.MatchString(got):
					t.Errorf("X-Request-Id = %q, want a generated id replacing %q", got, tc.sent)
				}
			})
		}
	}
	// Two requests without an id get different ids.
	a, err := raw.Get(env.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, err := raw.Get(env.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, a)
	readAll(t, b)
	if a.Header.Get("X-Request-Id") == b.Header.Get("X-Request-Id") {
		t.Error("generated request ids repeat")
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRequestLogsCarryNoSecrets(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	env := servertest.NewWithLogger(t, log)
	raw := env.HTTPClient(t, servertest.AllowInvalidRequests())

	const bodySecret = "body-secret-marker-7c1d"
	forged := "sb_forgedcredentialmarker0123456789abcdefghij"
	type sent struct {
		id, method, path, auth, body string
		status                       int
		route                        string
	}
	requests := []sent{
		{"log-1", "POST", "/v1/api-keys", "Bearer " + env.AdminKey, `{"name":"` + bodySecret + `","scopes":["llm"]}`, 201, "/v1/api-keys"},
		{"log-2", "POST", "/v1/api-keys", "Bearer " + env.AdminKey, `{"name":"x","scopes":["llm"],"secret":"` + bodySecret + `"}`, 400, "/v1/api-keys"},
		{"log-3", "GET", "/v1/api-keys?cursor=" + bodySecret, "Bearer " + forged, "", 401, "/v1/api-keys"},
		{"log-4", "GET", "/v1/api-keys/" + bodySecret, "Basic " + bodySecret, "", 401, "/v1/api-keys/:id"},
		{"log-5", "DELETE", "/v1/api-keys/missing", "Bearer " + env.AdminKey, "", 404, "/v1/api-keys/:id"},
	}
	var created string
	for _, r := range requests {
		var body io.Reader
		if r.body != "" {
			body = strings.NewReader(r.body)
		}
		req, _ := http.NewRequest(r.method, env.URL+r.path, body)
		req.Header.Set("Authorization", r.auth)
		req.Header.Set("X-Request-Id", r.id)
		req.Header.Set("Cookie", "session="+bodySecret)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := readAll(t, res)
		if res.StatusCode != r.status {
			t.Fatalf("%s %s = %d %s, want %d", r.method, r.path, res.StatusCode, b, r.status)
		}
		if r.status == 201 {
			var k struct{ Key string }
			_ = json.Unmarshal(b, &k)
			created = k.Key
		}
	}

	out := logs.String()
	for _, secret := range []string{env.AdminKey, forged, bodySecret, created, "Bearer", "Authorization"} {
		if secret != "" && strings.Contains(out, secret) {
			t.Errorf("the log contains %q:\n%s", secret, out)
		}
	}
	// One JSON line per request with the fields operators need.
	lines := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, sc.Text())
		}
		if m["msg"] == "request" {
			lines[fmt.Sprint(m["requestId"])] = m
		}
	}
	for _, r := range requests {
		m, ok := lines[r.id]
		if !ok {
			t.Errorf("no request log line for %s", r.id)
			continue
		}
		if m["method"] != r.method || m["route"] != r.route || m["status"] != float64(r.status) {
			t.Errorf("log line for %s = %v, want method %s route %s status %d", r.id, m, r.method, r.route, r.status)
		}
		if _, ok := m["durationMs"].(float64); !ok {
			t.Errorf("log line for %s has no durationMs: %v", r.id, m)
		}
		if r.status >= 400 && m["errorCode"] == nil {
			t.Errorf("log line for %s has no errorCode: %v", r.id, m)
		}
	}
	if m := lines["log-1"]; m != nil && !strings.HasPrefix(fmt.Sprint(m["principal"]), "key_") {
		t.Errorf("log line of an authenticated request names no principal id: %v", m)
	}
}
