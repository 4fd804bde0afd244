package connectors

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/transform"
)

// Limits on what a definition may hold. A value past one is refused with a
// 422 problem naming the limit.
const (
	// MaxDisplayNameLength bounds displayName, in characters.
	MaxDisplayNameLength = 128
	// MaxDescriptionLength bounds every description, in characters.
	MaxDescriptionLength = 4096
	// MaxURLLength bounds baseUrl, authorizationUrl and tokenUrl, in bytes.
	MaxURLLength = 2048
	// MaxTemplateBytes bounds an action's path and each header value.
	MaxTemplateBytes = 4096
	// MaxBodyTemplateBytes bounds an action's body template, as JSON.
	MaxBodyTemplateBytes = 64 << 10
	// MaxParameters bounds the parameters of an action.
	MaxParameters = 64
	// MaxHeaders bounds the header templates of an action.
	MaxHeaders = 32
	// MaxEnumValues bounds a parameter's enum.
	MaxEnumValues = 100
	// MaxScriptBytes bounds a transformation.
	MaxScriptBytes = 64 << 10
	// MaxScopes bounds an oauth2 configuration's scopes.
	MaxScopes = 32
	// MaxFieldLength bounds short strings (apiKey name and prefix, clientId,
	// a scope, a header name), in bytes.
	MaxFieldLength = 256
	// MaxClientSecretBytes bounds an OAuth 2.0 client secret.
	MaxClientSecretBytes = 4096
	// DefaultMaxTimeout caps timeoutMs when Service.MaxTimeout is zero.
	DefaultMaxTimeout = 120 * time.Second
)

// NamePattern is the syntax of connector and action names: usable as
// integrations.<connector> and as an identifier in every client language.
const NamePattern = `^[a-z][a-z0-9_]{0,63}$`

// ParameterNamePattern is the syntax of parameter names, usable as
// params.<name> in templates and as a query key or header name.
const ParameterNamePattern = `^[A-Za-z_][A-Za-z0-9_]{0,63}$`

var (
	nameRE      = regexp.MustCompile(NamePattern)
	paramNameRE = regexp.MustCompile(ParameterNamePattern)
)

// Methods are the HTTP methods an action may use.
var Methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// AuthTypes, APIKeyPlacements, Grants, ParameterTypes and
// ParameterPlacements list the known values of their fields.
var (
	AuthTypes           = []string{AuthNone, AuthAPIKey, AuthBearer, AuthBasic, AuthOAuth2}
	APIKeyPlacements    = []string{InHeader, InQuery, InCookie}
	Grants              = []string{GrantAuthorizationCode, GrantClientCredentials}
	ParameterTypes      = []string{TypeString, TypeNumber, TypeInteger, TypeBoolean, TypeArray, TypeObject}
	ParameterPlacements = []string{InPath, InQuery, InHeader, InBody}
)

// forbiddenHeaders are managed by the HTTP client or hop-by-hop; an action
// may not set them.
var forbiddenHeaders = []string{
	"Connection", "Content-Length", "Host", "Keep-Alive", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// problems collects validation failures.
type problems []errs.Problem

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, errs.Problem{Field: field, Problem: fmt.Sprintf(format, args...)})
}

func checkName(ps *problems, field, name, what string) {
	if name == "" {
		ps.add(field, "is required")
		return
	}
	if !nameRE.MatchString(name) {
		ps.add(field, "%s %q must match %s: a lower-case letter, then up to 63 lower-case letters, digits or underscores", what, name, NamePattern)
	}
}

// checkText bounds a human-readable string; single-line strings refuse
// control characters.
func checkText(ps *problems, field, s string, limit int, singleLine bool) {
	if n := utf8.RuneCountInString(s); n > limit {
		ps.add(field, "must be at most %d characters, got %d", limit, n)
	}
	bad := func(r rune) bool { return unicode.IsControl(r) && (singleLine || r != '\n' && r != '\r' && r != '\t') }
	if strings.IndexFunc(s, bad) >= 0 {
		ps.add(field, "must not contain control characters")
	}
}

// checkURL requires an absolute http(s) URL with a host, without
// credentials or fragment (and without a query when noQuery).
func checkURL(ps *problems, field, raw string, noQuery bool) {
	if raw == "" {
		ps.add(field, "is required")
		return
	}
	if len(raw) > MaxURLLength {
		ps.add(field, "must be at most %d bytes, got %d", MaxURLLength, len(raw))
		return
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		ps.add(field, "must not contain spaces or control characters")
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		ps.add(field, "is not a valid URL: %v", err)
		return
	}
	switch {
	case !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https"):
		ps.add(field, "must be an absolute http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		ps.add(field, "must name a host")
	case u.User != nil:
		ps.add(field, "must not contain credentials; configure them in auth and connections")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		ps.add(field, "must not have a fragment (#...)")
	case noQuery && (u.RawQuery != "" || u.ForceQuery):
		ps.add(field, "must not have a query (?...); declare query parameters on actions")
	case strings.Contains(raw, openDelim):
		ps.add(field, "must not contain templates; only action paths, headers and bodies are templates")
	}
	if u != nil && u.Port() != "" {
		if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
			ps.add(field, "has an invalid port %q", u.Port())
		}
	}
}

// validToken reports whether s is an RFC 9110 token (a header or cookie name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || c <= ' ' || c == 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func oneOf(list []string) string { return strings.Join(list, ", ") }

// validateConnector lists every problem of c. secretStored says whether a
// client secret is already stored (on replace), so that omitting it is fine.
func validateConnector(c Connector, secretStored bool) []errs.Problem {
	var ps problems
	checkName(&ps, "name", c.Name, "connector name")
	checkText(&ps, "displayName", c.DisplayName, MaxDisplayNameLength, true)
	checkText(&ps, "description", c.Description, MaxDescriptionLength, false)
	checkURL(&ps, "baseUrl", c.BaseURL, true)
	validateAuth(&ps, c.Auth, secretStored)
	validateConnectPage(&ps, c)
	return ps
}

// validateConnectPage checks the connect page's presentation: a logo over
// https (http only on a loopback host), plain help text, and a test action
// name on a connector whose connections the page makes.
func validateConnectPage(ps *problems, c Connector) {
	p := c.ConnectPage
	if p == nil {
		return
	}
	if p.LogoURL != "" {
		checkURL(ps, "connectPage.logoUrl", p.LogoURL, false)
		if u, err := url.Parse(p.LogoURL); err == nil && u.Scheme == "http" && !loopbackHost(u.Hostname()) {
			ps.add("connectPage.logoUrl", "must be an https:// URL (http:// only on a loopback host): the page is served to end users")
		}
	}
	checkText(ps, "connectPage.helpText", p.HelpText, MaxHelpTextLength, false)
	if p.TestAction != "" {
		checkName(ps, "connectPage.testAction", p.TestAction, "action name")
		if c.Auth.Type == AuthNone || c.Auth.Type == AuthOAuth2 && c.Auth.Grant == GrantClientCredentials {
			ps.add("connectPage.testAction", "does not apply: connector %q takes no credentials from its users (auth %s)", c.Name, authLabel(c.Auth))
		}
	}
}

// loopbackHost reports whether host names this machine.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authLabel names an auth configuration in messages: its type, and its
// grant for oauth2.
func authLabel(a Auth) string {
	if a.Type == AuthOAuth2 && a.Grant != "" {
		return a.Type + " " + a.Grant
	}
	return a.Type
}

func validateAuth(ps *problems, a Auth, secretStored bool) {
	if a.Type == "" {
		ps.add("auth.type", "is required; one of %s", oneOf(AuthTypes))
		return
	}
	if !slices.Contains(AuthTypes, a.Type) {
		ps.add("auth.type", "unknown auth type %q; one of %s", a.Type, oneOf(AuthTypes))
		return
	}
	// Fields of the other types are refused rather than ignored, so that
	// a definition never says something the server does not do.
	notFor := func(field string, set bool, typ string) {
		if set && a.Type != typ {
			ps.add("auth."+field, "applies only to auth type %s, not %s", typ, a.Type)
		}
	}
	notFor("name", a.Name != "", AuthAPIKey)
	notFor("in", a.In != "", AuthAPIKey)
	notFor("prefix", a.Prefix != "", AuthAPIKey)
	notFor("authorizationUrl", a.AuthorizationURL != "", AuthOAuth2)
	notFor("tokenUrl", a.TokenURL != "", AuthOAuth2)
	notFor("clientId", a.ClientID != "", AuthOAuth2)
	notFor("clientSecret", a.ClientSecret != "", AuthOAuth2)
	notFor("scopes", len(a.Scopes) > 0, AuthOAuth2)
	notFor("grant", a.Grant != "", AuthOAuth2)
	validateOAuthExtras(ps, a, notFor)

	switch a.Type {
	case AuthAPIKey:
		switch {
		case a.In == "":
			ps.add("auth.in", "is required for apiKey; one of %s", oneOf(APIKeyPlacements))
		case !slices.Contains(APIKeyPlacements, a.In):
			ps.add("auth.in", "unknown placement %q; one of %s", a.In, oneOf(APIKeyPlacements))
		}
		switch {
		case a.Name == "":
			ps.add("auth.name", "is required for apiKey: the %s that carries the key", placementNoun(a.In))
		case len(a.Name) > MaxFieldLength:
			ps.add("auth.name", "must be at most %d bytes, got %d", MaxFieldLength, len(a.Name))
		case (a.In == InHeader || a.In == InCookie) && !validToken(a.Name):
			ps.add("auth.name", "%q is not a valid %s name (letters, digits and !#$%%&'*+-.^_`|~ only)", a.Name, a.In)
		case strings.ContainsFunc(a.Name, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }):
			ps.add("auth.name", "must not contain spaces or control characters")
		}
		if a.In == InHeader && slices.Contains(forbiddenHeaders, httpCanonical(a.Name)) {
			ps.add("auth.name", "%s is managed by the HTTP client and cannot carry a key", httpCanonical(a.Name))
		}
		if len(a.Prefix) > MaxFieldLength {
			ps.add("auth.prefix", "must be at most %d bytes, got %d", MaxFieldLength, len(a.Prefix))
		}
		if strings.ContainsFunc(a.Prefix, unicode.IsControl) {
			ps.add("auth.prefix", "must not contain control characters")
		}
	case AuthOAuth2:
		switch {
		case a.Grant == "":
			ps.add("auth.grant", "is required for oauth2; one of %s", oneOf(Grants))
		case !slices.Contains(Grants, a.Grant):
			ps.add("auth.grant", "unknown grant %q; one of %s", a.Grant, oneOf(Grants))
		}
		if a.Grant == GrantAuthorizationCode {
			checkURL(ps, "auth.authorizationUrl", a.AuthorizationURL, false)
		} else if a.AuthorizationURL != "" && a.Grant == GrantClientCredentials {
			ps.add("auth.authorizationUrl", "applies only to grant %s", GrantAuthorizationCode)
		}
		checkURL(ps, "auth.tokenUrl", a.TokenURL, false)
		switch {
		case a.ClientID == "":
			ps.add("auth.clientId", "is required for oauth2")
		case len(a.ClientID) > MaxFieldLength:
			ps.add("auth.clientId", "must be at most %d bytes, got %d", MaxFieldLength, len(a.ClientID))
		case strings.ContainsFunc(a.ClientID, unicode.IsControl):
			ps.add("auth.clientId", "must not contain control characters")
		}
		switch {
		case len(a.ClientSecret) > MaxClientSecretBytes:
			ps.add("auth.clientSecret", "must be at most %d bytes", MaxClientSecretBytes)
		case strings.ContainsFunc(a.ClientSecret, unicode.IsControl):
			ps.add("auth.clientSecret", "must not contain control characters")
		case a.ClientSecret == "" && !secretStored && a.Grant == GrantClientCredentials:
			ps.add("auth.clientSecret", "is required for grant %s", GrantClientCredentials)
		}
		if len(a.Scopes) > MaxScopes {
			ps.add("auth.scopes", "must list at most %d scopes, got %d", MaxScopes, len(a.Scopes))
		}
		for i, s := range a.Scopes {
			field := "auth.scopes[" + strconv.Itoa(i) + "]"
			switch {
			case s == "":
				ps.add(field, "must not be empty")
			case len(s) > MaxFieldLength:
				ps.add(field, "must be at most %d bytes, got %d", MaxFieldLength, len(s))
			case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r == 0x7f }):
				ps.add(field, "must not contain spaces, quotes, backslashes or control characters (RFC 6749 scope-token)")
			case slices.Contains(a.Scopes[:i], s):
				ps.add(field, "duplicate scope %q", s)
			}
		}
	}
}

func placementNoun(in string) string {
	switch in {
	case InQuery:
		return "query parameter"
	case InCookie:
		return "cookie"
	}
	return "header"
}

func httpCanonical(name string) string {
	// Title-case each dash-separated word like net/http does, without
	// importing net/textproto's rules for invalid names.
	parts := strings.Split(strings.ToLower(name), "-")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "-")
}

// validateAction lists every problem of a. maxTimeout caps timeoutMs.
func validateAction(a Action, maxTimeout time.Duration) []errs.Problem {
	var ps problems
	checkName(&ps, "name", a.Name, "action name")
	checkText(&ps, "description", a.Description, MaxDescriptionLength, false)
	switch {
	case a.Method == "":
		ps.add("method", "is required; one of %s", oneOf(Methods))
	case !slices.Contains(Methods, a.Method):
		hint := ""
		if slices.Contains(Methods, strings.ToUpper(a.Method)) {
			hint = fmt.Sprintf(" (methods are upper case: %s)", strings.ToUpper(a.Method))
		}
		ps.add("method", "unknown method %q%s; one of %s", a.Method, hint, oneOf(Methods))
	}
	noBody := a.Method == "GET" || a.Method == "HEAD"

	// Parameters, in name order so that problems come out stably.
	names := make([]string, 0, len(a.Parameters))
	for n := range a.Parameters {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > MaxParameters {
		ps.add("parameters", "must declare at most %d parameters, got %d", MaxParameters, len(names))
	}

	// Templates: path, headers, body. used records which parameters each
	// template names.
	pathParams := map[string]bool{}
	undeclared := func(field string, t Template) {
		for _, p := range t.Params() {
			if _, ok := a.Parameters[p]; !ok {
				ps.add(field, "{{params.%s}} names an undeclared parameter; declare %q in parameters", p, p)
			}
		}
	}

	// Path. pathKnown says whether the path parsed, so that parameters are
	// not blamed for a path that did not.
	pathKnown := false
	switch {
	case a.Path == "":
		ps.add("path", "is required, e.g. /items/{{params.id}}")
	case len(a.Path) > MaxTemplateBytes:
		ps.add("path", "exceeds the template size limit of %d bytes (got %d)", MaxTemplateBytes, len(a.Path))
	default:
		t, err := ParseTemplate(a.Path)
		if err != nil {
			ps.add("path", "%v", err)
			break
		}
		if !strings.HasPrefix(a.Path, "/") {
			ps.add("path", "must start with /")
		}
		pathKnown = true
		checkPathLiterals(&ps, t)
		undeclared("path", t)
		for _, p := range t.Params() {
			pathParams[p] = true
		}
	}

	// Headers.
	headerNames := make([]string, 0, len(a.Headers))
	for n := range a.Headers {
		headerNames = append(headerNames, n)
	}
	sort.Strings(headerNames)
	if len(headerNames) > MaxHeaders {
		ps.add("headers", "must have at most %d headers, got %d", MaxHeaders, len(headerNames))
	}
	seenHeaders := map[string]string{}
	for _, h := range headerNames {
		field := FieldPath("headers", h)
		v := a.Headers[h]
		canon := httpCanonical(h)
		switch {
		case len(h) > MaxFieldLength:
			ps.add(field, "header name must be at most %d bytes", MaxFieldLength)
		case !validToken(h):
			ps.add(field, "%q is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~ only)", h)
		case slices.Contains(forbiddenHeaders, canon):
			ps.add(field, "%s is managed by the HTTP client and cannot be set", canon)
		case seenHeaders[canon] != "":
			ps.add(field, "duplicates header %q (header names are case-insensitive)", seenHeaders[canon])
		}
		seenHeaders[canon] = h
		if len(v) > MaxTemplateBytes {
			ps.add(field, "exceeds the template size limit of %d bytes (got %d)", MaxTemplateBytes, len(v))
			continue
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			ps.add(field, "header values must not contain CR, LF or NUL")
			continue
		}
		t, err := ParseTemplate(v)
		if err != nil {
			ps.add(field, "%v", err)
			continue
		}
		undeclared(field, t)
	}

	// Body.
	if a.Body != nil {
		b, err := json.Marshal(a.Body)
		switch {
		case err != nil:
			ps.add("body", "is not a JSON value: %v", err)
		case len(b) > MaxBodyTemplateBytes:
			ps.add("body", "exceeds the body template size limit of %d bytes (got %d)", MaxBodyTemplateBytes, len(b))
		case noBody:
			ps.add("body", "%s requests carry no body", a.Method)
		default:
			_ = WalkBody(a.Body, "body", func(field, s string) error {
				t, err := ParseTemplate(s)
				if err != nil {
					ps.add(field, "%v", err)
					return nil
				}
				undeclared(field, t)
				return nil
			})
		}
	}
	_, bodyIsObject := a.Body.(map[string]any)

	for _, n := range names {
		validateParameter(&ps, n, a.Parameters[n], paramContext{
			inPath:           pathParams[n],
			pathKnown:        pathKnown,
			method:           a.Method,
			noBody:           noBody,
			bodyTakesMembers: a.Body == nil || bodyIsObject,
		})
	}

	// Transformation.
	if a.Transformation != "" {
		if len(a.Transformation) > MaxScriptBytes {
			ps.add("transformation", "exceeds the script size limit of %d bytes (got %d)", MaxScriptBytes, len(a.Transformation))
		} else if _, err := transform.Compile(a.Connector+"."+a.Name, a.Transformation); err != nil {
			var ce *transform.CompileError
			if errors.As(err, &ce) {
				ps.add("transformation", "does not compile: line %d, column %d: %s", ce.Line, ce.Column, ce.Message)
			} else {
				ps.add("transformation", "does not compile: %v", err)
			}
		}
	}

	if maxTimeout <= 0 {
		maxTimeout = DefaultMaxTimeout
	}
	switch maxMs := int(maxTimeout / time.Millisecond); {
	case a.TimeoutMs < 0:
		ps.add("timeoutMs", "must be positive (or absent for the server's default)")
	case a.TimeoutMs > maxMs:
		ps.add("timeoutMs", "must be at most %d (the server's connectors.maxTimeout), got %d", maxMs, a.TimeoutMs)
	}
	return ps
}

// paramContext is what validating a parameter needs to know of its action.
type paramContext struct {
	inPath           bool   // the path template names the parameter
	pathKnown        bool   // the path template parsed
	method           string // the action's method
	noBody           bool   // the method carries no body
	bodyTakesMembers bool   // no body template, or an object one
}

func validateParameter(ps *problems, name string, p Parameter, pc paramContext) {
	field := FieldPath("parameters", name)
	inPath := pc.inPath
	if !paramNameRE.MatchString(name) {
		ps.add(field, "parameter name %q must match %s: a letter or underscore, then up to 63 letters, digits or underscores", name, ParameterNamePattern)
	}
	checkText(ps, field+".description", p.Description, MaxDescriptionLength, false)
	typeKnown := true
	switch {
	case p.Type == "":
		ps.add(field+".type", "is required; one of %s", oneOf(ParameterTypes))
		typeKnown = false
	case !slices.Contains(ParameterTypes, p.Type):
		ps.add(field+".type", "unknown type %q; one of %s", p.Type, oneOf(ParameterTypes))
		typeKnown = false
	}
	switch {
	case p.In != "" && !slices.Contains(ParameterPlacements, p.In):
		ps.add(field+".in", "unknown placement %q; one of %s", p.In, oneOf(ParameterPlacements))
	case inPath && p.In != "" && p.In != InPath:
		ps.add(field+".in", "is %q, but the path template uses {{params.%s}}; path parameters are placed in the path", p.In, name)
	case !inPath && p.In == InPath && pc.pathKnown:
		ps.add(field+".in", "is path, but the path template does not use {{params.%s}}", name)
	case p.In == InBody && pc.noBody:
		ps.add(field+".in", "is body, but %s requests carry no body", pc.method)
	case p.In == InBody && !pc.bodyTakesMembers:
		ps.add(field+".in", "is body, but the body template is not a JSON object to add the parameter to")
	}
	if inPath {
		if !p.Required {
			ps.add(field+".required", "must be true: the path template uses {{params.%s}}", name)
		}
		if typeKnown && (p.Type == TypeArray || p.Type == TypeObject) {
			ps.add(field+".type", "path parameters must be string, number, integer or boolean, not %s", p.Type)
		}
	}
	if len(p.Enum) > MaxEnumValues {
		ps.add(field+".enum", "must list at most %d values, got %d", MaxEnumValues, len(p.Enum))
	} else if typeKnown {
		seen := map[string]int{}
		for i, v := range p.Enum {
			ef := field + ".enum[" + strconv.Itoa(i) + "]"
			if msg := typeMismatch(p.Type, v); msg != "" {
				ps.add(ef, "%s", msg)
				continue
			}
			key := canonicalJSON(v)
			if j, dup := seen[key]; dup {
				ps.add(ef, "duplicates enum[%d]", j)
			}
			seen[key] = i
		}
	}
	if p.Default != nil && typeKnown {
		switch {
		case p.Required:
			ps.add(field+".default", "a required parameter never uses its default; make it optional or drop the default")
		case typeMismatch(p.Type, p.Default) != "":
			ps.add(field+".default", "%s", typeMismatch(p.Type, p.Default))
		case len(p.Enum) > 0 && !slices.ContainsFunc(p.Enum, func(e any) bool { return canonicalJSON(e) == canonicalJSON(p.Default) }):
			ps.add(field+".default", "is not one of the enum values")
		}
	}
}

// typeMismatch says why v (as decoded by encoding/json) is not of the
// parameter type typ, or "" when it is.
func typeMismatch(typ string, v any) string {
	ok := false
	switch typ {
	case TypeString:
		_, ok = v.(string)
	case TypeNumber:
		_, ok = v.(float64)
	case TypeInteger:
		f, isNum := v.(float64)
		ok = isNum && f == float64(int64(f)) && f >= -(1<<53) && f <= 1<<53
		if isNum && !ok {
			return fmt.Sprintf("must be an integer (within ±2^53), got %v", f)
		}
	case TypeBoolean:
		_, ok = v.(bool)
	case TypeArray:
		_, ok = v.([]any)
	case TypeObject:
		_, ok = v.(map[string]any)
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("must be of type %s, got %s", typ, jsonKind(v))
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func canonicalJSON(v any) string {
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	return string(b)
}

// checkPathLiterals requires the literal parts of a path template to be a
// path: RFC 3986 path characters and valid percent-escapes, no query or
// fragment, no dot segments.
func checkPathLiterals(ps *problems, t Template) {
	for _, s := range t.Segments {
		if s.IsPlaceholder() {
			continue
		}
		lit := s.Literal
		for i := 0; i < len(lit); i++ {
			c := lit[i]
			switch {
			case c == '?' || c == '#':
				ps.add("path", "%q at offset %d: a path has no query or fragment; declare query parameters with in: query", c, s.Offset+i)
				return
			case c == '%':
				if i+2 >= len(lit) || !isHex(lit[i+1]) || !isHex(lit[i+2]) {
					ps.add("path", "invalid percent-escape at offset %d", s.Offset+i)
					return
				}
			case !isPathChar(c):
				ps.add("path", "character %s at offset %d is not allowed in a path; percent-encode it", quoteByte(c), s.Offset+i)
				return
			}
		}
	}
	// Dot segments made only of literal text would be resolved away.
	canon := t.String()
	for _, seg := range strings.Split(canon, "/") {
		if seg == "." || seg == ".." {
			ps.add("path", "must not contain . or .. segments")
			return
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isPathChar reports whether c may appear unescaped in a URL path:
// unreserved, sub-delims, ':', '@' and '/'.
func isPathChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0
}
