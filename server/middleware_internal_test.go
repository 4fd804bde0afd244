package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ratelimit"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// newTestServer builds a Server (not started) logging into logs.
func newTestServer(t *testing.T, logs *bytes.Buffer) *Server {
	t.Helper()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), DBFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err := vault.New(vault.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	s, err := New(Options{Config: cfg, Store: st, Vault: v, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Internal failures answer 500 in the native shape without their cause,
// which goes to the log with the request id.
func TestInternalErrorsHideTheirCause(t *testing.T) {
	var logs bytes.Buffer
	s := newTestServer(t, &logs)
	const cause = "dial tcp 10.0.0.7:5432: secret-internal-detail"
	s.echo.GET("/test/panic", func(echo.Context) error { panic(cause) })
	s.echo.GET("/test/error", func(echo.Context) error { return fmt.Errorf("query failed: %s", cause) })
	s.echo.GET("/test/wrapped", func(echo.Context) error {
		return errs.Wrap(errs.Upstream, errors.New(cause), "the upstream failed")
	})
	cases := []struct {
		path, code, message string
		status              int
	}{
		{"/test/panic", "internal", "internal error", 500},
		{"/test/error", "internal", "internal error", 500},
		{"/test/wrapped", "upstream_error", "the upstream failed", 502},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			logs.Reset()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", tc.path, nil)
			req.Header.Set("X-Request-Id", "internal-1")
			s.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d", rec.Code, tc.status)
			}
			var body errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %s: %v", rec.Body, err)
			}
			if body.Error.Code != tc.code || body.Error.Message != tc.message || body.Error.RequestID != "internal-1" {
				t.Errorf("error = %+v", body.Error)
			}
			if strings.Contains(rec.Body.String(), "secret-internal-detail") {
				t.Errorf("the cause reached the caller: %s", rec.Body)
			}
			if !strings.Contains(logs.String(), "secret-internal-detail") || !strings.Contains(logs.String(), `"requestId":"internal-1"`) {
				t.Errorf("the cause is not logged with the request id:\n%s", &logs)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		kind errs.Kind
	}{
		{errs.E(errs.Conflict, "x"), errs.Conflict},
		{fmt.Errorf("wrapped: %w", errs.E(errs.PreconditionFailed, "x")), errs.PreconditionFailed},
		{errs.NotFound, errs.NotFound},
		{echo.ErrNotFound, errs.NotFound},
		{echo.ErrMethodNotAllowed, errs.MethodNotAllowed},
		{echo.ErrUnsupportedMediaType, errs.UnsupportedMedia},
		{echo.NewHTTPError(http.StatusBadRequest, "Invalid format for parameter limit"), errs.Invalid},
		{echo.NewHTTPError(http.StatusBadRequest, "x").SetInternal(errs.E(errs.TooLarge, "big")), errs.TooLarge},
		{&http.MaxBytesError{Limit: 10}, errs.TooLarge},
		{errors.New("boom"), errs.Internal},
		{echo.NewHTTPError(http.StatusBadGateway, "x"), errs.Internal},
	}
	for _, tc := range cases {
		if got := classify(tc.err).Kind; got != tc.kind {
			t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.kind)
		}
	}
}

func TestEchoPath(t *testing.T) {
	for in, want := range map[string]string{
		"/":                     "/",
		"/healthz":              "/healthz",
		"/v1/api-keys/{id}":     "/v1/api-keys/:id",
		"/v1/models/{p}/{n}":    "/v1/models/:p/:n",
		"/v1/x/{a}/actions/{b}": "/v1/x/:a/actions/:b",
	} {
		if got := echoPath(in); got != want {
			t.Errorf("echoPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// A route registered without a spec entry makes New fail (so no route
// escapes authentication and documentation).
func TestRoutesMustBeInTheSpec(t *testing.T) {
	var logs bytes.Buffer
	s := newTestServer(t, &logs)
	if err := s.checkRoutesInSpec(); err != nil {
		t.Fatalf("the real routes: %v", err)
	}
	s.echo.POST("/v1/undocumented", func(echo.Context) error { return nil })
	err := s.checkRoutesInSpec()
	if err == nil || !strings.Contains(err.Error(), "POST /v1/undocumented") {
		t.Errorf("checkRoutesInSpec = %v, want it to name POST /v1/undocumented", err)
	}
}

// Every operation that takes a credential must declare its plane: one that
// declares none, or an unknown one, makes the spec unusable, so that no new
// route falls on a plane by default.
func TestPlaneMustBeDeclared(t *testing.T) {
	tests := []struct {
		name  string
		plane string // "" for no extension
		want  string // substring of the error; "" for none
	}{
		{"control", "control", ""},
		{"data", "data", ""},
		{"missing", "", "operations without x-switchboard-plane: data (spends models or upstreams) or control: POST /v1/things"},
		{"unknown value", "admin", "POST /v1/things"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ext := ""
			if tc.plane != "" {
				ext = "\n      x-switchboard-plane: " + tc.plane
			}
			spec, err := openapi3.NewLoader().LoadFromData([]byte(`openapi: 3.0.3
info: {title: t, version: "1"}
security: [{bearerAuth: []}]
paths:
  /v1/things:
    post:
      operationId: makeThing` + ext + `
      responses: {"204": {description: ok}}
  /healthz:
    get:
      operationId: health
      security: []
      responses: {"200": {description: ok}}
components:
  securitySchemes:
    bearerAuth: {type: http, scheme: bearer}
`))
			if err != nil {
				t.Fatal(err)
			}
			_, err = scopesFromSpec(spec)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("scopesFromSpec = %v, want %q", err, tc.want)
			}
		})
	}
}

// The data plane is what spends models and upstreams: in the real spec,
// exactly the operations that need the llm or invoke scope. An operation
// put on the wrong plane fails here.
func TestPlanesOfTheRealSpec(t *testing.T) {
	spec, err := LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := scopesFromSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	var data int
	for k, r := range rs {
		if r.public {
			continue
		}
		spends := slices.ContainsFunc(r.anyOf, func(s []string) bool {
			return slices.Contains(s, "llm") || slices.Contains(s, "invoke")
		})
		want := ratelimit.ControlPlane
		if spends {
			want = ratelimit.DataPlane
			data++
		}
		if r.plane != want {
			t.Errorf("%s %s is on the %s plane, want %s", k.method, k.path, r.plane, want)
		}
	}
	if data == 0 {
		t.Error("no data-plane operation found")
	}
}
