package servertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/switchboard-dev/terraform-provider-switchboard/server"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
)

// ForeignErrorPrefixes are path prefixes whose errors have another shape
// than ErrorResponse (the OpenAI- and Anthropic-compatible APIs answer
// their own shapes, the OAuth token endpoint RFC 6749's, the MCP endpoint
// JSON-RPC's); their responses are still validated against what the spec
// declares.
var ForeignErrorPrefixes = []string{"/openai/", "/anthropic/", "/v1/oauth/token", "/mcp"}

// Operation is one operation of the spec.
type Operation struct {
	// ID is the operationId.
	ID string
	// Method is the HTTP method.
	Method string
	// Path is the path template, e.g. /v1/api-keys/{id}.
	Path string
}

// String formats the operation as "METHOD /path (operationId)".
func (o Operation) String() string { return o.Method + " " + o.Path + " (" + o.ID + ")" }

// spec is the embedded spec with a router that matches any host.
var spec = sync.OnceValues(func() (*specRouter, error) {
	doc, err := server.LoadSpec()
	if err != nil {
		return nil, err
	}
	doc.Servers = nil // match the test server's host and port
	r, err := legacy.NewRouter(doc)
	if err != nil {
		hint := ""
		if strings.Contains(err.Error(), "extra sibling fields") {
			hint = ` (hint: in a flow mapping like {type: string, description: a, b} the comma starts a new key; quote the description)`
		}
		return nil, fmt.Errorf("openapi.yaml is not a valid OpenAPI document: %w%s", err, hint)
	}
	er := doc.Components.Schemas["ErrorResponse"]
	if er == nil || er.Value == nil {
		return nil, errors.New("openapi.yaml: components.schemas.ErrorResponse is missing")
	}
	var ops []Operation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, Operation{ID: op.OperationID, Method: method, Path: path})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Path+ops[i].Method < ops[j].Path+ops[j].Method })
	return &specRouter{doc: doc, router: r, errorSchema: er.Value, ops: ops}, nil
})

type specRouter struct {
	doc         *openapi3.T
	router      routers.Router
	errorSchema *openapi3.Schema
	ops         []Operation
}

// exercised records the operations a validated exchange went through, for
// the whole test binary.
var exercised = struct {
	sync.Mutex
	ops map[string]bool
}{ops: map[string]bool{}}

// Operations lists every operation of the spec.
func Operations() ([]Operation, error) {
	s, err := spec()
	if err != nil {
		return nil, err
	}
	return slices.Clone(s.ops), nil
}

// Unexercised lists the operations of the spec that no validated exchange
// of this test binary has gone through yet.
func Unexercised() ([]Operation, error) {
	ops, err := Operations()
	if err != nil {
		return nil, err
	}
	exercised.Lock()
	defer exercised.Unlock()
	var out []Operation
	for _, o := range ops {
		if !exercised.ops[o.Method+" "+o.Path] {
			out = append(out, o)
		}
	}
	return out, nil
}

// TransportOption adjusts a validating transport.
type TransportOption func(*validatingTransport)

// WithKey sends Authorization: Bearer key on requests that carry no
// Authorization header of their own.
func WithKey(key string) TransportOption {
	return func(v *validatingTransport) { v.key = key }
}

// AllowInvalidRequests lets requests that break the spec through (to test
// how the server refuses them). Their responses are still validated, but
// they do not count as exercising an operation.
func AllowInvalidRequests() TransportOption {
	return func(v *validatingTransport) { v.allowInvalid = true }
}

// validatingTransport validates every exchange with the server against the
// spec and fails the test on any mismatch. Requests to other hosts pass
// through unchecked.
type validatingTransport struct {
	t            testing.TB
	base         http.RoundTripper
	host         string
	key          string
	allowInvalid bool
}

var _ http.RoundTripper = (*validatingTransport)(nil)

func (v *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != v.host {
		return v.base.RoundTrip(req)
	}
	s, err := spec()
	if err != nil {
		v.t.Errorf("servertest: %v", err)
		return nil, err
	}
	// Buffer the body so that it can be both validated and sent.
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	out := req.Clone(req.Context())
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	if v.key != "" && out.Header.Get("Authorization") == "" {
		out.Header.Set("Authorization", "Bearer "+v.key)
	}
	what := req.Method + " " + req.URL.RequestURI()

	route, params, routeErr := findRoute(s.router, out)
	var reqInput *openapi3filter.RequestValidationInput
	requestValid := false
	if routeErr == nil {
		check := out.Clone(req.Context())
		if body != nil {
			check.Body = io.NopCloser(bytes.NewReader(body))
		}
		reqInput = &openapi3filter.RequestValidationInput{
			Request:    check,
			PathParams: params,
			Route:      route,
			Options: &openapi3filter.Options{
				AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
				MultiError:         true,
			},
		}
		err := openapi3filter.ValidateRequest(req.Context(), reqInput)
		switch {
		case err == nil:
			requestValid = true
		case !v.allowInvalid:
			v.t.Errorf("servertest: request %s does not match the spec: %v", what, err)
		}
	}

	resp, err := v.base.RoundTrip(out)
	if err != nil {
		return resp, err
	}
	status := fmt.Sprintf("%s -> %d", what, resp.StatusCode)
	if resp.Header.Get(requestid.Header) == "" {
		v.t.Errorf("servertest: %s: response has no %s header", status, requestid.Header)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	isJSON := mt == "application/json" || strings.HasSuffix(mt, "+json")
	var respBody []byte
	if isJSON || resp.StatusCode >= 400 {
		respBody, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(respBody))
		if err != nil {
			return resp, err
		}
	}

	if routeErr != nil {
		// Not an operation of the spec: only a native error is acceptable
		// (unknown route 404, wrong method 405).
		if resp.StatusCode < 400 {
			v.t.Errorf("servertest: %s: the route is not in the spec (%v) but answered success", status, routeErr)
		}
	} else {
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: reqInput,
			Status:                 resp.StatusCode,
			Header:                 resp.Header,
			Options: &openapi3filter.Options{
				IncludeResponseStatus: true,
				MultiError:            true,
				// Streams (SSE) are checked for status and content type only.
				ExcludeResponseBody: !isJSON,
			},
		}
		if isJSON {
			in.SetBodyBytes(respBody)
		}
		if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
			v.t.Errorf("servertest: response %s does not match the spec: %v\nbody: %s", status, err, snippet(respBody))
		} else if !isJSON {
			// kin-openapi checks the content type only with the body.
			if r := declared(route.Operation, resp.StatusCode); r != nil && len(r.Content) > 0 && r.Content.Get(resp.Header.Get("Content-Type")) == nil {
				v.t.Errorf("servertest: response %s does not match the spec: Content-Type %q is not declared", status, resp.Header.Get("Content-Type"))
			}
		}
		if requestValid && !v.allowInvalid {
			exercised.Lock()
			exercised.ops[route.Method+" "+route.Path] = true
			exercised.Unlock()
		}
	}
	// An error page the operation declares as text/html (the OAuth
	// callback answers browsers so) was validated above; it is no ErrorResponse.
	htmlDeclared := routeErr == nil && mt == "text/html" && declared(route.Operation, resp.StatusCode) != nil &&
		declared(route.Operation, resp.StatusCode).Content.Get("text/html") != nil
	if resp.StatusCode >= 400 && req.Method != http.MethodHead && !htmlDeclared && !slices.ContainsFunc(ForeignErrorPrefixes, func(p string) bool { return strings.HasPrefix(req.URL.Path, p) }) {
		v.checkErrorShape(s, status, resp, respBody)
	}
	return resp, nil
}

// checkErrorShape requires a native error to be an ErrorResponse whose
// requestId is the response's X-Request-Id.
func (v *validatingTransport) checkErrorShape(s *specRouter, status string, resp *http.Response, body []byte) {
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		v.t.Errorf("servertest: error %s has Content-Type %q, want application/json\nbody: %s", status, ct, snippet(body))
		return
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		v.t.Errorf("servertest: error %s is not JSON: %v\nbody: %s", status, err, snippet(body))
		return
	}
	if err := s.errorSchema.VisitJSON(doc, openapi3.MultiErrors(), openapi3.VisitAsResponse()); err != nil {
		v.t.Errorf("servertest: error %s does not match ErrorResponse: %v\nbody: %s", status, err, snippet(body))
		return
	}
	var e struct {
		Error struct {
			RequestID string `json:"requestId"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if got, want := e.Error.RequestID, resp.Header.Get(requestid.Header); got != want {
		v.t.Errorf("servertest: error %s has requestId %q, but %s is %q", status, got, requestid.Header, want)
	}
}

// findRoute matches the request's escaped path, as Echo does, so that an
// encoded "/" (%2F) stays inside one path parameter; parameter values are
// unescaped for validation.
func findRoute(r routers.Router, req *http.Request) (*routers.Route, map[string]string, error) {
	rr := *req
	u := *req.URL
	u.Path, u.RawPath = req.URL.EscapedPath(), ""
	rr.URL = &u
	route, params, err := r.FindRoute(&rr)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range params {
		if uv, err := url.PathUnescape(v); err == nil {
			params[k] = uv
		}
	}
	return route, params, nil
}

// declared returns the response an operation declares for status, or nil.
func declared(op *openapi3.Operation, status int) *openapi3.Response {
	r := op.Responses.Status(status)
	if r == nil {
		r = op.Responses.Default()
	}
	if r == nil {
		return nil
	}
	return r.Value
}

func snippet(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}
