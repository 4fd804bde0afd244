package connectors

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// Building requests.
//
// BuildRequest turns an action, the caller's parameters and a connection's
// credentials into the one HTTP request the action sends:
//
//   - parameters are checked against their declarations (unknown names,
//     required ones, types, enums) and defaults applied; every problem is
//     reported at once, as a 400 listing them;
//   - the path template is joined to the connector's baseUrl (whose path
//     prefix is kept, with exactly one slash between them); each
//     {{params.x}} becomes exactly one escaped path segment, and a value
//     that is empty, "." or contains "/", "..", "?", "#" or a control
//     character is refused;
//   - each parameter goes where it is declared (in: path|query|header|
//     body); without `in`, to the path when the path names it, nowhere
//     else when a header or body template names it, else to the query for
//     GET, DELETE, HEAD and OPTIONS and to a JSON body for the rest;
//   - header templates are expanded; a CR, LF or other control character
//     in any header value is refused;
//   - the credential is added as the connector says, last, so that no
//     template can replace it.

// Request is an outgoing request built from an action.
type Request struct {
	Method string
	URL    *url.URL
	Header http.Header
	// Body is the encoded body; nil for none.
	Body []byte
	// CredentialHeaders name the headers that carry the credential, and
	// CredentialQuery the query parameter that does: both are removed when
	// a redirect leaves the original origin.
	CredentialHeaders []string
	CredentialQuery   string
	// Secrets are the values that must never be echoed in a response, a
	// log line or an error (see Redactor).
	Secrets []string
}

// userAgent identifies Switchboard to upstream APIs.
const userAgent = "Switchboard"

// HTTPRequest returns a new *http.Request for r (one per attempt).
func (r *Request) HTTPRequest(ctx context.Context) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://placeholder/", bytes.NewReader(r.Body))
	if err != nil {
		return nil, err
	}
	u := *r.URL
	req.URL, req.Host = &u, u.Host
	req.Header = r.Header.Clone()
	if r.Body == nil {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	}
	return req, nil
}

// noBodyMethods send their parameters in the query by default.
func noBodyDefault(method string) bool {
	switch method {
	case http.MethodGet, http.MethodDelete, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}

// BuildRequest builds the request action a of connector c sends for the
// caller's params with the credentials cred. Problems with params are an
// errs.Invalid error whose details.problems list each ({field, problem});
// a definition that does not parse (it was validated when saved) is
// errs.Internal. No error ever quotes a credential.
func BuildRequest(c Connector, a Action, params map[string]any, cred Credentials) (*Request, error) {
	var ps problems
	values := resolveParams(&ps, a, params)

	base, err := url.Parse(c.BaseURL)
	if err != nil || base.Host == "" {
		return nil, errs.E(errs.Internal, "connector %q has an invalid baseUrl", c.Name)
	}
	pathT, err := ParseTemplate(a.Path)
	if err != nil {
		return nil, errs.E(errs.Internal, "action %s.%s has an invalid path template", c.Name, a.Name)
	}

	// Which parameters do the templates use?
	inPath := map[string]bool{}
	for _, p := range pathT.Params() {
		inPath[p] = true
	}
	inTemplates := map[string]bool{}
	headerTemplates := make(map[string]Template, len(a.Headers))
	for name, text := range a.Headers {
		t, err := ParseTemplate(text)
		if err != nil {
			return nil, errs.E(errs.Internal, "action %s.%s has an invalid header template %s", c.Name, a.Name, name)
		}
		headerTemplates[name] = t
		for _, p := range t.Params() {
			inTemplates[p] = true
		}
	}
	if a.Body != nil {
		_ = WalkBody(a.Body, "body", func(_, s string) error {
			if t, err := ParseTemplate(s); err == nil {
				for _, p := range t.Params() {
					inTemplates[p] = true
				}
			}
			return nil
		})
	}
	_, bodyIsObject := a.Body.(map[string]any)

	// Placement of each supplied parameter, in name order.
	var queryParams, headerParams, bodyParams []string
	for _, name := range sortedKeys(values) {
		p := a.Parameters[name]
		where := p.In
		if where == "" {
			switch {
			case inPath[name]:
				where = InPath
			case inTemplates[name]:
				continue // the templates place it
			case noBodyDefault(a.Method) || (a.Body != nil && !bodyIsObject):
				where = InQuery
			default:
				where = InBody
			}
		}
		switch where {
		case InQuery:
			queryParams = append(queryParams, name)
		case InHeader:
			headerParams = append(headerParams, name)
		case InBody:
			if !inTemplates[name] {
				bodyParams = append(bodyParams, name)
			}
		}
	}

	// Path: the base path without its trailing slash, then the template
	// with each placeholder escaped as one segment.
	var raw strings.Builder
	raw.WriteString(strings.TrimSuffix(base.EscapedPath(), "/"))
	for _, seg := range pathT.Segments {
		if !seg.IsPlaceholder() {
			raw.WriteString(seg.Literal)
			continue
		}
		s, ok := pathValue(&ps, seg.Param, values[seg.Param])
		if ok {
			raw.WriteString(url.PathEscape(s))
		}
	}
	u := &url.URL{Scheme: base.Scheme, Host: base.Host, RawPath: raw.String()}
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, errs.E(errs.Internal, "action %s.%s builds an invalid path", c.Name, a.Name)
	}

	// Query.
	q := base.Query()
	for _, name := range queryParams {
		for _, s := range valueTexts(values[name]) {
			q.Add(name, s)
		}
	}

	// Headers.
	h := http.Header{}
	h.Set("User-Agent", userAgent)
	h.Set("Accept", "application/json, */*;q=0.5")
	for _, name := range sortedKeys(headerTemplates) {
		t := headerTemplates[name]
		if p, single := t.SingleParam(); single && values[p] == nil {
			continue // an optional parameter without a value: no header
		}
		v, _ := t.Expand(func(p string) (string, error) { return valueText(values[p]) })
		if headerValueOK(&ps, FieldPath("headers", name), v) {
			h.Set(name, v)
		}
	}
	for _, name := range headerParams {
		v := strings.Join(valueTexts(values[name]), ", ")
		if headerValueOK(&ps, "params."+name, v) {
			h.Set(name, v)
		}
	}

	// Body.
	var body any
	hasBody := false
	if a.Body != nil {
		body, err = RenderBody(a.Body, values)
		if err != nil {
			return nil, errs.E(errs.Internal, "action %s.%s has an invalid body template", c.Name, a.Name)
		}
		hasBody = true
	}
	if len(bodyParams) > 0 {
		if body == nil {
			body = map[string]any{}
		}
		obj, ok := body.(map[string]any)
		if !ok {
			return nil, errs.E(errs.Internal, "action %s.%s places parameters in a body template that is not an object", c.Name, a.Name)
		}
		for _, name := range bodyParams {
			if _, set := obj[name]; !set {
				obj[name] = values[name]
			}
		}
		hasBody = true
	}

	if len(ps) > 0 {
		return nil, invalidParams(c, a, ps)
	}

	r := &Request{Method: a.Method, URL: u, Header: h}
	if hasBody {
		if r.Body, err = encodeBody(h, body); err != nil {
			return nil, errs.Wrap(errs.Invalid, err, fmt.Sprintf("the body of %s.%s cannot be encoded: %v", c.Name, a.Name, err))
		}
	}
	if err := applyCredentials(r, c, cred, q); err != nil {
		return nil, err
	}
	u.RawQuery = q.Encode()
	return r, nil
}

func invalidParams(c Connector, a Action, ps problems) error {
	what := "a problem"
	if len(ps) > 1 {
		what = fmt.Sprintf("%d problems", len(ps))
	}
	first := ps[0].Field + " " + ps[0].Problem
	return errs.E(errs.Invalid, "params of %s.%s have %s: %s", c.Name, a.Name, what, first).
		WithDetails(map[string]any{"problems": []errs.Problem(ps)})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// resolveParams checks params against the action's declarations and
// returns the values to send: the supplied ones (null meaning absent) and
// the defaults of absent optional ones.
func resolveParams(ps *problems, a Action, params map[string]any) map[string]any {
	values := make(map[string]any, len(a.Parameters))
	for _, name := range sortedKeys(params) {
		if _, ok := a.Parameters[name]; !ok {
			ps.add("params."+name, "unknown parameter; %s", declared(a))
		}
	}
	for _, name := range sortedKeys(a.Parameters) {
		p := a.Parameters[name]
		field := "params." + name
		v, given := params[name]
		if !given || v == nil {
			switch {
			case p.Required:
				ps.add(field, "is required (%s)", p.Type)
			case p.Default != nil:
				values[name] = p.Default
			}
			continue
		}
		if msg := typeMismatch(p.Type, v); msg != "" {
			ps.add(field, "%s", msg)
			continue
		}
		if len(p.Enum) > 0 {
			key := canonicalJSON(v)
			found := false
			for _, e := range p.Enum {
				if canonicalJSON(e) == key {
					found = true
					break
				}
			}
			if !found {
				ps.add(field, "must be one of %s", canonicalJSON(p.Enum))
				continue
			}
		}
		values[name] = v
	}
	return values
}

func declared(a Action) string {
	if len(a.Parameters) == 0 {
		return "the action declares no parameters"
	}
	return "the action declares " + strings.Join(sortedKeys(a.Parameters), ", ")
}

// pathValue is the text of a path parameter's value, refused when it
// could be anything but one path segment.
func pathValue(ps *problems, name string, v any) (string, bool) {
	field := "params." + name
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case float64, bool:
		s, _ = valueText(x)
	case nil:
		return "", false // reported as required
	default:
		ps.add(field, "is a path parameter and must be a string, number or boolean, got %s", jsonKind(v))
		return "", false
	}
	bad := ""
	switch {
	case s == "":
		bad = "must not be empty: it is a path segment"
	case s == ".":
		bad = `must not be ".": it is a path segment`
	case strings.Contains(s, "/"):
		bad = `must not contain "/": it is exactly one path segment`
	case strings.Contains(s, ".."):
		bad = `must not contain ".."`
	case strings.ContainsAny(s, "?#"):
		bad = `must not contain "?" or "#"`
	case strings.ContainsFunc(s, unicode.IsControl):
		bad = "must not contain control characters"
	}
	if bad != "" {
		ps.add(field, "%s", bad)
		return "", false
	}
	return s, true
}

// valueTexts renders a value for a query or header: each element of an
// array on its own, anything else as one text.
func valueTexts(v any) []string {
	if arr, ok := v.([]any); ok {
		out := make([]string, 0, len(arr))
		for _, e := range arr {
			s, _ := valueText(e)
			out = append(out, s)
		}
		return out
	}
	s, _ := valueText(v)
	return []string{s}
}

// headerValueOK refuses a header value with a control character (CR, LF,
// NUL, ...; a tab is allowed), which could split or smuggle headers.
func headerValueOK(ps *problems, field, v string) bool {
	if strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) {
		ps.add(field, "header values must not contain CR, LF or other control characters")
		return false
	}
	return true
}

// encodeBody encodes a body as its Content-Type says: a form for
// application/x-www-form-urlencoded objects, else JSON (setting
// Content-Type: application/json when the action set none).
func encodeBody(h http.Header, body any) ([]byte, error) {
	ct := h.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if obj, ok := body.(map[string]any); ok && mt == "application/x-www-form-urlencoded" {
		form := url.Values{}
		for _, k := range sortedKeys(obj) {
			for _, s := range valueTexts(obj[k]) {
				form.Add(k, s)
			}
		}
		return []byte(form.Encode()), nil
	}
	if ct == "" {
		h.Set("Content-Type", "application/json")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// applyCredentials adds the credential where the connector says.
func applyCredentials(r *Request, c Connector, cred Credentials, q url.Values) error {
	r.Secrets = cred.Secrets()
	bad := func(v string) bool {
		return strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) })
	}
	switch c.Auth.Type {
	case AuthAPIKey:
		v := c.Auth.Prefix + cred.APIKey
		if cred.APIKey == "" {
			return errs.E(errs.Internal, "the connection has no API key")
		}
		if bad(v) {
			return errs.E(errs.Internal, "the connection's API key cannot be sent: it contains control characters")
		}
		switch c.Auth.In {
		case InQuery:
			q.Set(c.Auth.Name, v)
			r.CredentialQuery = c.Auth.Name
			if e := url.QueryEscape(v); e != v {
				r.Secrets = append(r.Secrets, url.QueryEscape(cred.APIKey))
			}
		case InCookie:
			if !validCookieValue(v) {
				return errs.E(errs.Internal, "the connection's API key cannot be sent in a cookie")
			}
			pair := c.Auth.Name + "=" + v
			if old := r.Header.Get("Cookie"); old != "" {
				pair = old + "; " + pair
			}
			r.Header.Set("Cookie", pair)
			r.CredentialHeaders = append(r.CredentialHeaders, "Cookie")
		default:
			r.Header.Set(c.Auth.Name, v)
			r.CredentialHeaders = append(r.CredentialHeaders, c.Auth.Name)
		}
	case AuthBearer, AuthOAuth2:
		if cred.Token == "" {
			return errs.E(errs.Internal, "the connection has no token")
		}
		if bad(cred.Token) {
			return errs.E(errs.Internal, "the connection's token cannot be sent: it contains control characters")
		}
		r.Header.Set("Authorization", "Bearer "+cred.Token)
		r.CredentialHeaders = append(r.CredentialHeaders, "Authorization")
	case AuthBasic:
		if bad(cred.Username) || bad(cred.Password) {
			return errs.E(errs.Internal, "the connection's username or password cannot be sent: it contains control characters")
		}
		enc := base64.StdEncoding.EncodeToString([]byte(cred.Username + ":" + cred.Password))
		r.Header.Set("Authorization", "Basic "+enc)
		r.CredentialHeaders = append(r.CredentialHeaders, "Authorization")
		r.Secrets = append(r.Secrets, enc)
	}
	return nil
}
