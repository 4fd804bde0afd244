package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	fastjson "github.com/goccy/go-json"
	"github.com/labstack/echo/v4"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/ratelimit"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/requestid"
)

// requestID honours a well-formed X-Request-Id or assigns one, and puts it
// on the response and in the request context. The context also carries the
// response headers, so that the rate limiter can add its token headers when
// an LLM call reserves tokens (ratelimit.Limiter.Reserve): one copy of the
// request for both.
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		id := r.Header.Get(requestid.Header)
		if !requestid.Valid(id) {
			id = requestid.New()
		}
		h := c.Response().Header()
		h.Set(requestid.Header, id)
		c.SetRequest(r.WithContext(ratelimit.WithHeader(requestid.With(r.Context(), id), h)))
		return next(c)
	}
}

// logRequests writes one JSON log line per request. It never logs headers
// or bodies, so no credential reaches the log.
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		r := c.Request()
		level := slog.LevelInfo
		status := c.Response().Status
		if status >= 500 {
			level = slog.LevelError
		}
		attrs := []slog.Attr{
			slog.String("requestId", requestid.From(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", c.Path()),
			slog.Int("status", status),
			slog.Float64("durationMs", float64(time.Since(start).Microseconds())/1000),
			slog.Int64("bytesOut", c.Response().Size),
		}
		if p := auth.FromContext(r.Context()); p != nil {
			attrs = append(attrs, slog.String("principal", p.ID)) // an id, never the credential
		}
		if code, ok := c.Get(ctxErrorCode).(string); ok {
			attrs = append(attrs, slog.String("errorCode", code))
		}
		s.log.LogAttrs(r.Context(), level, "request", attrs...)
		return nil
	}
}

// recoverPanics turns a handler panic into a 500 and logs its stack.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic", "requestId", requestid.From(c.Request().Context()), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				err = errs.E(errs.Internal, "internal error")
			}
		}()
		return next(c)
	}
}

// limitBody caps every request body at limits.bodyBytes.
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > s.cfg.Limits.BodyBytes {
			return tooLarge(s.cfg.Limits.BodyBytes)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, s.cfg.Limits.BodyBytes)
		return next(c)
	}
}

// checkMediaType refuses a request body whose Content-Type the operation
// does not accept (415), and a missing body the operation requires (400),
// before any handler decodes it.
func (s *Server) checkMediaType(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req, ok := s.scopes[routeKey{c.Request().Method, c.Path()}]
		if !ok || len(req.bodyTypes) == 0 {
			return next(c)
		}
		r := c.Request()
		if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
			if req.bodyRequired {
				return errs.E(errs.Invalid, "request body is empty; expected %s", strings.Join(req.bodyTypes, " or "))
			}
			return next(c)
		}
		ct := r.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !acceptsMediaType(req.bodyTypes, strings.ToLower(mt)) {
			got := ct
			if got == "" {
				got = "no Content-Type"
			}
			return errs.E(errs.UnsupportedMedia, "request body must be %s (Content-Type), got %s", strings.Join(req.bodyTypes, " or "), got).
				WithDetails(map[string]any{"accepted": req.bodyTypes})
		}
		return next(c)
	}
}

// checkPathParams refuses a matched route whose path parameter is empty
// (/v1/connectors//actions), naming the parameter, before the generated
// wrapper's binding error ("Invalid format for parameter ...") can.
func (s *Server) checkPathParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for i, v := range c.ParamValues() {
			if v != "" || i >= len(c.ParamNames()) {
				continue
			}
			name := c.ParamNames()[i]
			route := c.Path()
			for _, n := range c.ParamNames() {
				route = strings.Replace(route, ":"+n, "{"+n+"}", 1)
			}
			return errs.E(errs.Invalid, "path parameter %s is empty: the URL has an empty segment (\"//\" or a trailing \"/\") where {%s} belongs in %s", name, name, route).
				WithDetails(map[string]any{"problems": []errs.Problem{{Field: name, Problem: "path parameter is empty"}}})
		}
		return next(c)
	}
}

// noSuchRoute is the 404 of an unmatched route; it points out an empty
// path segment, the usual reason (GET /v1/connectors/ for a missing name).
func noSuchRoute(path string) *errs.Error {
	if len(path) > 1 && (strings.HasSuffix(path, "/") || strings.Contains(path, "//")) {
		return errs.E(errs.NotFound, "no such route: the path has an empty segment (\"//\" or a trailing \"/\"); give the id it stands for, or leave the trailing \"/\" out")
	}
	return errs.E(errs.NotFound, "no such route")
}

// acceptsMediaType matches mt against the spec's media types, including
// the wildcards "*/*" and "type/*".
func acceptsMediaType(accepted []string, mt string) bool {
	major, _, _ := strings.Cut(mt, "/")
	return slices.ContainsFunc(accepted, func(a string) bool {
		return a == mt || a == "*/*" || a == major+"/*"
	})
}

func tooLarge(limit int64) *errs.Error {
	return errs.E(errs.TooLarge, "request body exceeds the limit of %d bytes (limits.bodyBytes)", limit).
		WithDetails(map[string]any{"limit": "limits.bodyBytes", "maxBytes": limit})
}

// authenticate resolves the bearer credential and checks the scopes the
// spec requires for the matched route. Routes the spec marks public
// (security: []) and unmatched routes (404/405) pass through.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req, ok := s.scopes[routeKey{c.Request().Method, c.Path()}]
		if !ok || req.public {
			return next(c)
		}
		h := c.Request().Header.Get("Authorization")
		if h == "" && strings.HasPrefix(c.Request().URL.Path, anthropicPrefix) {
			// Anthropic's SDKs send their key as x-api-key.
			if key := strings.TrimSpace(c.Request().Header.Get("x-api-key")); key != "" {
				h = "Bearer " + key
			}
		}
		if h == "" {
			key, ok, err := s.consoleCredential(c.Request())
			if err != nil {
				return err
			}
			if ok {
				h = "Bearer " + key
			}
		}
		scheme, cred, _ := strings.Cut(h, " ")
		challenge := c.Response().Header()
		if h == "" {
			challenge.Set("WWW-Authenticate", `Bearer realm="switchboard"`)
			if strings.HasPrefix(c.Request().URL.Path, anthropicPrefix) {
				return errs.E(errs.Unauthenticated, "missing credential; send x-api-key: <API key or access token> or Authorization: Bearer <API key or access token>")
			}
			return errs.E(errs.Unauthenticated, "missing Authorization header; send Authorization: Bearer <API key or access token>")
		}
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(cred) == "" {
			challenge.Set("WWW-Authenticate", `Bearer realm="switchboard", error="invalid_request"`)
			return errs.E(errs.Unauthenticated, "Authorization header must use the Bearer scheme")
		}
		ctx := c.Request().Context()
		p, err := s.authn.Authenticate(ctx, strings.TrimSpace(cred))
		if err != nil {
			if errs.KindOf(err) == errs.Unauthenticated {
				challenge.Set("WWW-Authenticate", `Bearer realm="switchboard", error="invalid_token"`)
			}
			return err
		}
		if err := req.check(p); err != nil {
			if errs.KindOf(err) == errs.Forbidden && len(req.anyOf) > 0 {
				challenge.Set("WWW-Authenticate", `Bearer realm="switchboard", error="insufficient_scope", scope="`+strings.Join(req.anyOf[0], " ")+`"`)
			}
			return err
		}
		c.SetRequest(c.Request().WithContext(auth.WithPrincipal(ctx, p)))
		return next(c)
	}
}

// consoleCredential is the API key of the console session whose cookie r
// carries, for the console's own calls to /v1: ok is false without the
// cookie. A write must carry the session's CSRF token (web.CSRFHeader).
func (s *Server) consoleCredential(r *http.Request) (key string, ok bool, err error) {
	if s.console == nil || !strings.HasPrefix(r.URL.Path, "/v1/") {
		return "", false, nil
	}
	sess, ok, err := s.console.FromRequest(r)
	if !ok || err != nil {
		return "", ok, err
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if err := sess.CheckWrite(r); err != nil {
			return "", true, err
		}
	}
	return sess.Key, true, nil
}

// routeRequirement is an operation's security: public, or any one of
// several scope sets (each needed in full); the plane whose rate limit it
// counts against; and the media types its request body may have (none when
// it takes no body).
type routeRequirement struct {
	public       bool
	anyOf        [][]string
	plane        ratelimit.Plane
	bodyTypes    []string
	bodyRequired bool
	// modelCall: a POST that needs the llm scope, whose request is
	// counted together with its token reservation (see rateLimit).
	modelCall bool
}

func (r routeRequirement) check(p *auth.Principal) error {
	if len(r.anyOf) == 0 {
		return nil
	}
	var first error
	for _, scopes := range r.anyOf {
		err := p.Require(scopes...)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// routeKey is a route as Echo names it: method and path pattern (/a/:b).
type routeKey struct{ method, path string }

// routeScopes maps each route to its operation's requirement.
type routeScopes map[routeKey]routeRequirement

// planeExtension is the OpenAPI extension that puts an operation on the
// data or the control plane (see ratelimit.Plane).
const planeExtension = "x-switchboard-plane"

// scopesFromSpec reads each operation's security and plane from the
// OpenAPI document. Every operation that takes a credential must declare
// its plane: a new route cannot fall on a plane by default.
func scopesFromSpec(spec *openapi3.T) (routeScopes, error) {
	out := routeScopes{}
	var unclassified []string
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			sec := spec.Security
			if op.Security != nil {
				sec = *op.Security
			}
			var r routeRequirement
			if len(sec) == 0 {
				r.public = true
			}
			for _, alt := range sec {
				if len(alt) == 0 {
					r.public = true // an empty alternative: no credential needed
					continue
				}
				for _, scopes := range alt {
					if len(scopes) > 0 {
						r.anyOf = append(r.anyOf, scopes)
					}
				}
			}
			if r.public {
				r.anyOf = nil
			} else {
				r.modelCall = method == http.MethodPost && slices.ContainsFunc(r.anyOf, func(scopes []string) bool {
					return slices.Contains(scopes, auth.ScopeLLM)
				})
				v, _ := op.Extensions[planeExtension].(string)
				plane, ok := ratelimit.ParsePlane(v)
				if !ok {
					unclassified = append(unclassified, method+" "+path)
				}
				r.plane = plane
			}
			if rb := op.RequestBody; rb != nil && rb.Value != nil {
				for mt := range rb.Value.Content {
					r.bodyTypes = append(r.bodyTypes, mt)
				}
				r.bodyRequired = rb.Value.Required
			}
			out[routeKey{method, echoPath(path)}] = r
		}
	}
	if len(unclassified) > 0 {
		slices.Sort(unclassified)
		return nil, fmt.Errorf("openapi.yaml: operations without %s: data (spends models or upstreams) or control: %s",
			planeExtension, strings.Join(unclassified, ", "))
	}
	return out, nil
}

// echoPath turns /a/{b}/c into /a/:b/c.
func echoPath(p string) string {
	var b strings.Builder
	for _, seg := range strings.Split(p, "/") {
		if b.Len() > 0 || seg != "" {
			b.WriteByte('/')
		}
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			b.WriteString(":" + seg[1:len(seg)-1])
		} else {
			b.WriteString(seg)
		}
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// checkRoutesInSpec fails when a registered route is missing from the spec,
// so that no route escapes authentication or documentation.
func (s *Server) checkRoutesInSpec() error {
	var missing []string
	for _, r := range s.echo.Routes() {
		if r.Method == echo.RouteNotFound || strings.HasSuffix(r.Path, "/*") && r.Method == "" {
			continue
		}
		if _, ok := s.scopes[routeKey{r.Method, r.Path}]; !ok {
			missing = append(missing, r.Method+" "+r.Path)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("routes missing from openapi.yaml: %s", strings.Join(missing, ", "))
	}
	return nil
}

// ctxErrorCode is the echo.Context key under which handleError leaves the
// error code for the request log.
const ctxErrorCode = "switchboard.errorCode"

// errorBody is the wire error shape of the native API.
type errorBody struct {
	Error errorFields `json:"error"`
}

type errorFields struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"requestId"`
	Details   map[string]any `json:"details,omitempty"`
}

// classify turns any error into an *errs.Error safe to send.
func classify(err error) *errs.Error {
	var e *errs.Error
	if errors.As(err, &e) {
		return e
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(mbe.Limit)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := fmt.Sprint(he.Message)
		switch he.Code {
		case http.StatusNotFound:
			return errs.E(errs.NotFound, "no such route")
		case http.StatusMethodNotAllowed:
			return errs.E(errs.MethodNotAllowed, "method not allowed on this route")
		case http.StatusRequestEntityTooLarge:
			return errs.E(errs.TooLarge, "request body too large")
		case http.StatusUnsupportedMediaType:
			return errs.E(errs.UnsupportedMedia, "request body must be JSON (Content-Type: application/json)")
		case http.StatusUnauthorized:
			return errs.E(errs.Unauthenticated, "%s", msg)
		case http.StatusForbidden:
			return errs.E(errs.Forbidden, "%s", msg)
		}
		if he.Code >= 400 && he.Code < 500 {
			return errs.E(errs.Invalid, "%s", msg)
		}
		return &errs.Error{Kind: errs.Internal, Message: "internal error", Err: err}
	}
	var k errs.Kind
	if errors.As(err, &k) {
		return &errs.Error{Kind: k, Message: strings.ReplaceAll(string(k), "_", " ")}
	}
	return &errs.Error{Kind: errs.Internal, Message: "internal error", Err: err}
}

// handleError writes every error in the one shape of design.md.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	e := classify(err)
	if errors.Is(err, echo.ErrNotFound) {
		e = noSuchRoute(c.Request().URL.Path)
	}
	c.Set(ctxErrorCode, string(e.Kind))
	ctx := c.Request().Context()
	status := e.Kind.Status()
	if status >= 500 {
		s.log.Error("request failed", "requestId", requestid.From(ctx), "route", c.Path(), "code", e.Kind, "error", err.Error())
	}
	if e.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	if ew := s.errorWriterFor(c); ew != nil {
		ew(c, status, e)
		return
	}
	writeNativeError(c, status, e)
}

// writeNativeError writes e in the native API's shape.
func writeNativeError(c echo.Context, status int, e *errs.Error) {
	_ = c.JSON(status, nativeError(c.Request().Context(), e))
}

// nativeError is e in the native API's shape, for the request in ctx.
func nativeError(ctx context.Context, e *errs.Error) errorBody {
	return errorBody{Error: errorFields{Code: string(e.Kind), Message: e.Message, RequestID: requestid.From(ctx), Details: e.Details}}
}

// errorWriters lets a route family (the OpenAI-compatible API) answer errors
// in its own shape; keyed by path prefix.
type errorWriter func(c echo.Context, status int, e *errs.Error)

func (s *Server) errorWriterFor(c echo.Context) errorWriter {
	for prefix, w := range s.errorWriters {
		if strings.HasPrefix(c.Request().URL.Path, prefix) {
			return w
		}
	}
	return nil
}

// strictJSON decodes request bodies refusing unknown fields and trailing
// data, with errors that say where the body went wrong.
type strictJSON struct{}

func (strictJSON) Serialize(c echo.Context, i any, indent string) error {
	enc := json.NewEncoder(c.Response())
	if indent != "" {
		enc.SetIndent("", indent)
	}
	return enc.Encode(i)
}

func (strictJSON) Deserialize(c echo.Context, i any) error {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer bodyBuffers.Put(buf)
	if _, err := buf.ReadFrom(c.Request().Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(mbe.Limit)
		}
		return errs.Wrap(errs.Invalid, err, "reading the request body failed: "+err.Error())
	}
	if raw, ok := i.(*json.RawMessage); ok {
		// A body the spec leaves free-form (the OpenAI-compatible routes)
		// is decoded by its handler, which reports malformed JSON itself:
		// checking it here too would read it twice.
		*raw = bytes.Clone(buf.Bytes())
		return nil
	}
	return DecodeJSON(buf.Bytes(), i, true)
}

// bodyBuffers holds the buffers request bodies are read into.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// DecodeJSON decodes the one JSON value in data into v (a pointer),
// mapping failures to errs kinds with the offset or field at fault. Decoded
// values never refer to data.
//
// Names are exact and unique: checkNames first refuses a name that appears
// twice in one object and one that matches a field only when case is
// ignored, each with its JSON path (both decoders below would match names
// case-insensitively and keep the last of two). With disallowUnknown, a
// name v does not declare is refused too: encoding/json reports whichever
// error comes first in the body, and an unknown field with its JSON path.
//
// The common case, a valid body, is decoded by goccy/go-json; any failure
// is decoded again by encoding/json, whose errors say precisely what and
// where, and whose verdict stands (FuzzDecodeJSON holds both to the same
// results, and checkNames to an independent reading of the names).
func DecodeJSON(data []byte, v any, disallowUnknown bool) error {
	refused, unknown := checkNames(data, v, disallowUnknown)
	if refused != nil {
		return refused
	}
	if unknown != nil {
		if err := stdDecode(data, v, disallowUnknown); err != nil && !isUnknownField(err) {
			return err // an earlier problem
		}
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
			rv.Elem().SetZero()
		}
		return unknown
	}
	if fastDecode(data, v, disallowUnknown) {
		return nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv.Elem().SetZero() // drop what the fast decoder filled in before failing
	}
	return stdDecode(data, v, disallowUnknown)
}

// fastDecode reports whether goccy/go-json decoded data into v whole.
func fastDecode(data []byte, v any, disallowUnknown bool) bool {
	if disallowUnknown {
		return fastjson.UnmarshalWithOption(data, v, disallowUnknownFields) == nil
	}
	return fastjson.Unmarshal(data, v) == nil
}

// disallowUnknownFields is goccy's Decoder.DisallowUnknownFields as an
// option of Unmarshal, which spares the Decoder's buffer: the flag is read
// off a Decoder once, so that it is goccy's own, whatever its value.
var disallowUnknownFields = func() fastjson.DecodeOptionFunc {
	d := fastjson.NewDecoder(strings.NewReader("0"))
	d.DisallowUnknownFields()
	var opt fastjson.DecodeOption
	var n int
	if err := d.DecodeWithOption(&n, func(o *fastjson.DecodeOption) { opt = *o }); err != nil {
		panic(err)
	}
	flags := opt.Flags
	return func(o *fastjson.DecodeOption) { o.Flags |= flags }
}()

// errUnknownField marks stdDecode's error for a name v does not declare;
// checkNames describes the same name with its JSON path.
var errUnknownField = errors.New("unknown field")

func isUnknownField(err error) bool { return errors.Is(err, errUnknownField) }

// stdDecode decodes with encoding/json, mapping its errors.
func stdDecode(data []byte, v any, disallowUnknown bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if disallowUnknown {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			return errs.E(errs.Invalid, "malformed JSON: unexpected data after the top-level value at offset %d", dec.InputOffset())
		}
		return nil
	}
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, io.EOF):
		return errs.E(errs.Invalid, "request body is empty; expected a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errs.E(errs.Invalid, "malformed JSON: unexpected end of input at offset %d", len(data))
	case errors.As(err, &syn):
		return errs.E(errs.Invalid, "malformed JSON at offset %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(body)"
		}
		return errs.E(errs.Invalid, "field %s: expected %s, got JSON %s (offset %d)", field, typ.Type.String(), typ.Value, typ.Offset).
			WithDetails(map[string]any{"problems": []errs.Problem{{Field: field, Problem: "expected " + typ.Type.String() + ", got " + typ.Value}}})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return &errs.Error{Kind: errs.Invalid, Message: "unknown field " + name, Err: errUnknownField}
	}
	var tpe *time.ParseError
	if errors.As(err, &tpe) {
		return errs.E(errs.Invalid, "invalid timestamp %q: expected RFC 3339, e.g. 2030-01-02T15:04:05Z (offset %d)", tpe.Value, dec.InputOffset())
	}
	// Other decoding failures come from a value's own UnmarshalJSON; they
	// describe the caller's input and are safe to send back.
	return errs.Wrap(errs.Invalid, err, fmt.Sprintf("invalid JSON value at offset %d: %s", dec.InputOffset(), err.Error()))
}
