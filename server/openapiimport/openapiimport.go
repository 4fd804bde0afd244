// Package openapiimport turns an API description (OpenAPI 3.0, 3.1 or
// Swagger 2.0, read with kin-openapi) into a Switchboard connector and one
// action per operation, for `switchboard openapi import` and
// POST /v1/openapi/import.
//
// The mapping:
//   - connector: displayName and description from info, baseUrl from the
//     first absolute server URL (Swagger 2.0: schemes, host and basePath;
//     server variables take their defaults), auth from securitySchemes
//     (apiKey, http bearer and basic, oauth2 authorizationCode and
//     clientCredentials; the client id and secret are left to the user);
//   - action: the name is the operationId in snake case (method and path
//     without one), cut to 64 characters with a hash, collisions numbered in
//     path order; names are computed over the whole description, so that a
//     filter never renames an action;
//   - parameters: path, query and header parameters, and the top-level
//     properties of an object JSON request body (in: body); a name that is
//     not a parameter name is mapped ("per-page" → "per_page") and the path,
//     header or body template sends it under its original name; a non-object
//     JSON body is one parameter "body".
//
// An operation that cannot be mapped is listed in Result.Skipped with the
// reason, never dropped: every action in Result.Actions passes the
// validation the server applies when an action is saved.
package openapiimport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// MaxDescription bounds the descriptions an import writes, in characters:
// longer ones are cut, ending with "…".
const MaxDescription = 1024

// Options select and shape what Import produces.
type Options struct {
	// Connector is the connector's name (^[a-z][a-z0-9_]{0,63}$).
	Connector string
	// Tags, when not empty, import the operations carrying one of them.
	Tags []string
	// Operations, when not empty, import these operations, named by
	// operationId or by action name. With Tags, an operation matching
	// either is imported.
	Operations []string
	// BaseURL, when set, is the connector's baseUrl instead of the one
	// from the description's servers.
	BaseURL string
	// MaxActions, when positive, bounds the operations selected; more is
	// errs.Validation telling to filter.
	MaxActions int
}

// Result is a connector with its actions, and what could not be mapped.
type Result struct {
	// Connector is the connector to create (without timestamps; its oauth2
	// clientId, when auth is oauth2, is left for the user).
	Connector connectors.Connector `json:"connector"`
	// Actions are the mapped operations in path order.
	Actions []connectors.Action `json:"actions"`
	// Skipped are the selected operations that could not be mapped.
	Skipped []Skipped `json:"skipped"`
	// Notes say what else of the description was not mapped (e.g. a
	// security scheme Switchboard does not support).
	Notes []string `json:"notes,omitempty"`
}

// Skipped is an operation that was not imported, and why.
type Skipped struct {
	// Operation is "METHOD /path".
	Operation string `json:"operation"`
	// OperationID is the operation's operationId, when it has one.
	OperationID string `json:"operationId,omitempty"`
	// Reason says why it could not be mapped.
	Reason string `json:"reason"`
}

var connectorNameRE = regexp.MustCompile(connectors.NamePattern)

// methods are the operations of a path item in the order they are read.
var methods = []string{"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE", "CONNECT"}

// operation is one operation of the description with its action name.
type operation struct {
	method, path string
	item         *openapi3.PathItem
	op           *openapi3.Operation
	name         string
}

func (o operation) label() string { return o.method + " " + o.path }

// Import parses data (see Parse) and maps it as the package doc says.
//
// Errors: a description that does not parse is errs.Invalid; an invalid
// connector name, a filter that matches nothing, a description without an
// absolute server URL (and no Options.BaseURL), or more operations than
// Options.MaxActions is errs.Validation naming the field.
func Import(ctx context.Context, data []byte, opts Options) (Result, error) {
	doc, err := Parse(ctx, data)
	if err != nil {
		return Result{}, err
	}
	return FromDoc(doc, opts)
}

// FromDoc maps a parsed description as Import does.
func FromDoc(doc *openapi3.T, opts Options) (Result, error) {
	if !connectorNameRE.MatchString(opts.Connector) {
		return Result{}, errs.Problems("invalid import", []errs.Problem{{Field: "connector",
			Problem: fmt.Sprintf("connector name %q must match %s: a lower-case letter, then up to 63 lower-case letters, digits or underscores", opts.Connector, connectors.NamePattern)}})
	}
	var res Result
	c := connectors.Connector{Name: opts.Connector, Auth: connectors.Auth{Type: connectors.AuthNone}}
	if doc.Info != nil {
		c.DisplayName = clean(doc.Info.Title, connectors.MaxDisplayNameLength, true)
		c.Description = clean(doc.Info.Description, MaxDescription, false)
	}
	base, err := baseURL(doc, opts.BaseURL)
	if err != nil {
		return Result{}, err
	}
	c.BaseURL = base
	c.Auth, res.Notes = authFrom(doc)
	res.Connector = c

	ops := operations(doc)
	selected, err := selectOps(ops, opts)
	if err != nil {
		return Result{}, err
	}
	if opts.MaxActions > 0 && len(selected) > opts.MaxActions {
		return Result{}, errs.Problems("invalid import", []errs.Problem{{Field: "operations",
			Problem: fmt.Sprintf("%d operations selected, at most %d per import; select fewer with tags or operations", len(selected), opts.MaxActions)}})
	}
	res.Actions = []connectors.Action{}
	res.Skipped = []Skipped{}
	for _, o := range selected {
		a, notes, reason := mapOperation(o, c.Auth)
		if reason == "" {
			if ps := connectors.ValidateAction(a, 0); len(ps) > 0 {
				reason = fmt.Sprintf("the action would not validate: %s: %s", ps[0].Field, ps[0].Problem)
				if len(ps) > 1 {
					reason += fmt.Sprintf(" (and %d more problems)", len(ps)-1)
				}
			}
		}
		if reason != "" {
			res.Skipped = append(res.Skipped, Skipped{Operation: o.label(), OperationID: o.op.OperationID, Reason: reason})
			continue
		}
		a.Connector = c.Name
		res.Actions = append(res.Actions, a)
		for _, n := range notes {
			res.Notes = append(res.Notes, o.label()+": "+n)
		}
	}
	return res, nil
}

// operations lists every operation of doc in path order, then method
// order, each with its unique action name.
func operations(doc *openapi3.T) []operation {
	paths := doc.Paths.Keys()
	sort.Strings(paths)
	var ops []operation
	used := map[string]bool{}
	for _, p := range paths {
		item := doc.Paths.Value(p)
		if item == nil {
			continue
		}
		all := item.Operations()
		for _, m := range methods {
			op := all[m]
			if op == nil {
				continue
			}
			name := uniqueName(actionName(op.OperationID, m, p), used)
			ops = append(ops, operation{method: m, path: p, item: item, op: op, name: name})
		}
	}
	return ops
}

// selectOps applies the tag and operation filters; a filter that matches
// nothing is an error.
func selectOps(ops []operation, opts Options) ([]operation, error) {
	if len(opts.Tags) == 0 && len(opts.Operations) == 0 {
		return ops, nil
	}
	tagHit := make([]bool, len(opts.Tags))
	opHit := make([]bool, len(opts.Operations))
	var out []operation
	for _, o := range ops {
		take := false
		for i, t := range opts.Tags {
			if slices.Contains(o.op.Tags, t) {
				tagHit[i], take = true, true
			}
		}
		for i, id := range opts.Operations {
			if id != "" && (id == o.op.OperationID || id == o.name) {
				opHit[i], take = true, true
			}
		}
		if take {
			out = append(out, o)
		}
	}
	var ps []errs.Problem
	for i, t := range opts.Tags {
		if !tagHit[i] {
			ps = append(ps, errs.Problem{Field: fmt.Sprintf("tags[%d]", i), Problem: fmt.Sprintf("no operation has tag %q (tags are case-sensitive)", t)})
		}
	}
	for i, id := range opts.Operations {
		if !opHit[i] {
			ps = append(ps, errs.Problem{Field: fmt.Sprintf("operations[%d]", i), Problem: fmt.Sprintf("no operation has operationId or action name %q", id)})
		}
	}
	if err := errs.Problems("invalid import", ps); err != nil {
		return nil, err
	}
	return out, nil
}

// baseURL is override, or the first absolute http(s) server URL with its
// variables set to their defaults, without a trailing slash.
func baseURL(doc *openapi3.T, override string) (string, error) {
	if override != "" {
		return strings.TrimSuffix(override, "/"), nil
	}
	var relative []string
	for _, s := range doc.Servers {
		if s == nil {
			continue
		}
		raw := s.URL
		names := make([]string, 0, len(s.Variables))
		for n := range s.Variables {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if v := s.Variables[n]; v != nil {
				raw = strings.ReplaceAll(raw, "{"+n+"}", v.Default)
			}
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			relative = append(relative, s.URL)
			continue
		}
		return strings.TrimSuffix(raw, "/"), nil
	}
	found := "it lists no servers"
	if len(relative) > 0 {
		found = fmt.Sprintf("its servers are not absolute http(s) URLs (%q)", relative[0])
	}
	return "", errs.Problems("invalid import", []errs.Problem{{Field: "baseUrl",
		Problem: "the description gives no base URL: " + found + "; pass one (--base-url, or baseUrl in the request)"}})
}

// authFrom maps the first security scheme Switchboard supports, preferring
// those the description requires globally, then the others by name; notes
// name the schemes it could not map.
func authFrom(doc *openapi3.T) (connectors.Auth, []string) {
	none := connectors.Auth{Type: connectors.AuthNone}
	if doc.Components == nil || len(doc.Components.SecuritySchemes) == 0 {
		return none, nil
	}
	var order []string
	for _, req := range doc.Security {
		names := make([]string, 0, len(req))
		for n := range req {
			names = append(names, n)
		}
		sort.Strings(names)
		order = append(order, names...)
	}
	all := make([]string, 0, len(doc.Components.SecuritySchemes))
	for n := range doc.Components.SecuritySchemes {
		all = append(all, n)
	}
	sort.Strings(all)
	order = append(order, all...)
	var notes []string
	tried := map[string]bool{}
	for _, n := range order {
		if tried[n] {
			continue
		}
		tried[n] = true
		ref := doc.Components.SecuritySchemes[n]
		if ref == nil || ref.Value == nil {
			continue
		}
		a, why := mapScheme(ref.Value)
		if why == "" {
			if len(notes) > 0 {
				notes = append(notes, fmt.Sprintf("auth comes from security scheme %q", n))
			}
			return a, notes
		}
		notes = append(notes, fmt.Sprintf("security scheme %q not mapped: %s", n, why))
	}
	return none, append(notes, "auth is none: set the connector's auth yourself")
}

func mapScheme(s *openapi3.SecurityScheme) (connectors.Auth, string) {
	switch strings.ToLower(s.Type) {
	case "apikey":
		in := strings.ToLower(s.In)
		if !slices.Contains(connectors.APIKeyPlacements, in) || s.Name == "" {
			return connectors.Auth{}, fmt.Sprintf("apiKey in %q named %q", s.In, s.Name)
		}
		return connectors.Auth{Type: connectors.AuthAPIKey, Name: s.Name, In: in}, ""
	case "http":
		switch strings.ToLower(s.Scheme) {
		case "bearer":
			return connectors.Auth{Type: connectors.AuthBearer}, ""
		case "basic":
			return connectors.Auth{Type: connectors.AuthBasic}, ""
		}
		return connectors.Auth{}, fmt.Sprintf("http scheme %q (bearer and basic are supported)", s.Scheme)
	case "oauth2":
		if s.Flows == nil {
			return connectors.Auth{}, "oauth2 without flows"
		}
		if f := s.Flows.AuthorizationCode; f != nil {
			return connectors.Auth{Type: connectors.AuthOAuth2, Grant: connectors.GrantAuthorizationCode,
				AuthorizationURL: f.AuthorizationURL, TokenURL: f.TokenURL, Scopes: scopes(f.Scopes)}, ""
		}
		if f := s.Flows.ClientCredentials; f != nil {
			return connectors.Auth{Type: connectors.AuthOAuth2, Grant: connectors.GrantClientCredentials,
				TokenURL: f.TokenURL, Scopes: scopes(f.Scopes)}, ""
		}
		return connectors.Auth{}, "oauth2 with only implicit or password flows (authorizationCode and clientCredentials are supported)"
	}
	return connectors.Auth{}, fmt.Sprintf("type %s is not supported", s.Type)
}

// scopes lists an oauth2 flow's scopes in order, when there are few enough
// to request them all; else none (the user picks).
func scopes(m map[string]string) []string {
	if len(m) == 0 || len(m) > connectors.MaxScopes {
		return nil
	}
	out := make([]string, 0, len(m))
	for s := range m {
		if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r == 0x7f }) {
			return nil
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// clean makes s a valid description: control characters dropped (but
// newlines and tabs when !singleLine), trimmed, at most limit characters.
func clean(s string, limit int, singleLine bool) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == utf8.RuneError:
			return -1
		case (r == '\n' || r == '\t') && singleLine:
			return ' '
		case r == '\n' || r == '\t':
			return r
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:limit-1])) + "…"
}

// httpCanonical is the canonical form of a header name.
func httpCanonical(name string) string { return http.CanonicalHeaderKey(name) }

// jsonValue is v as encoding/json decodes it (float64 numbers,
// map[string]any objects), or ok false when it has no JSON form.
func jsonValue(v any) (any, bool) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil, false
	}
	return out, true
}

// MarshalJSON writes r in the shape the API takes definitions in: no
// timestamps, versions or other output-only fields, so that the connector
// and each action can be sent to POST /v1/connectors and
// POST /v1/connectors/{name}/actions as they are.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	var m map[string]any
	b, err := json.Marshal(plain(r))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	strip := func(v any, keys ...string) {
		if o, ok := v.(map[string]any); ok {
			for _, k := range keys {
				delete(o, k)
			}
		}
	}
	strip(m["connector"], "createdAt", "updatedAt", "version")
	if c, ok := m["connector"].(map[string]any); ok {
		strip(c["auth"], "clientSecretSet")
	}
	if list, ok := m["actions"].([]any); ok {
		for _, a := range list {
			strip(a, "connector", "createdAt", "updatedAt", "version")
		}
	}
	return json.Marshal(m)
}
