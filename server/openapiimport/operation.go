package openapiimport

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
)

// maxSchemaDepth bounds how deep allOf, oneOf and anyOf are followed.
const maxSchemaDepth = 8

var pathParamRE = regexp.MustCompile(`\{([^{}]*)\}`)

// mapper builds one action, giving each parameter a distinct name.
type mapper struct {
	a    connectors.Action
	used map[string]bool
	// notes say which optional parameters were left out, and why.
	notes []string
}

// claim reserves a parameter name for a value placed in `in`: name, else
// name_<in> when another parameter has it; ok false when both are taken.
func (m *mapper) claim(name, in string) (string, bool) {
	for _, n := range []string{name, fit(name, "_"+in)} {
		if !m.used[n] {
			m.used[n] = true
			return n, true
		}
	}
	return "", false
}

// mapOperation maps one operation to an action, or says why it cannot;
// notes name the optional parameters it left out.
func mapOperation(o operation, auth connectors.Auth) (a connectors.Action, notes []string, reason string) {
	a, reason = o.mapWith(auth, &notes)
	if reason != "" {
		return connectors.Action{}, nil, reason
	}
	return a, notes, ""
}

func (o operation) mapWith(auth connectors.Auth, notes *[]string) (connectors.Action, string) {
	if !slices.Contains(connectors.Methods, o.method) {
		return connectors.Action{}, fmt.Sprintf("method %s is not supported by actions (%s)", o.method, strings.Join(connectors.Methods, ", "))
	}
	m := &mapper{
		a: connectors.Action{
			Name:        o.name,
			Method:      o.method,
			Description: describe(o.op),
			Parameters:  map[string]connectors.Parameter{},
			Headers:     map[string]string{},
		},
		used: map[string]bool{},
	}

	// Parameters: the path item's, overridden by the operation's of the
	// same name and location.
	type key struct{ in, name string }
	var order []key
	params := map[key]*openapi3.Parameter{}
	for _, list := range []openapi3.Parameters{o.item.Parameters, o.op.Parameters} {
		for _, ref := range list {
			if ref == nil || ref.Value == nil {
				continue
			}
			k := key{strings.ToLower(ref.Value.In), ref.Value.Name}
			if _, seen := params[k]; !seen {
				order = append(order, k)
			}
			params[k] = ref.Value
		}
	}
	pathNames := map[string]string{}
	for _, k := range order {
		p := params[k]
		switch k.in {
		case "cookie":
			if !p.Required {
				m.notes = append(m.notes, fmt.Sprintf("optional cookie parameter %q left out: actions cannot send cookies", p.Name))
				continue
			}
			return connectors.Action{}, fmt.Sprintf("required cookie parameter %q: actions cannot send cookies", p.Name)
		case openapi3.ParameterInHeader:
			if sentByCredential(auth, connectors.InHeader, p.Name) {
				continue // the connector's credential is this header
			}
		case openapi3.ParameterInQuery:
			if sentByCredential(auth, connectors.InQuery, p.Name) {
				continue
			}
		case openapi3.ParameterInPath:
		default:
			return connectors.Action{}, fmt.Sprintf("parameter %q is in %q, not path, query, header or cookie", p.Name, p.In)
		}
		name, ok := paramName(p.Name)
		if !ok {
			return connectors.Action{}, fmt.Sprintf("%s parameter %q has no letter or digit to name it by", k.in, p.Name)
		}
		if k.in == openapi3.ParameterInQuery && name != p.Name {
			why := fmt.Sprintf("query parameter %q is not a valid parameter name (%s), and a query parameter is sent under its parameter name", p.Name, connectors.ParameterNamePattern)
			if !p.Required {
				m.notes = append(m.notes, "optional "+why+": left out")
				continue
			}
			return connectors.Action{}, "required " + why
		}
		if name, ok = m.claim(name, k.in); !ok {
			return connectors.Action{}, fmt.Sprintf("%s parameter %q: its name %q is taken by other parameters", k.in, p.Name, name)
		}
		schema := p.Schema
		if schema == nil {
			for _, mt := range sortedContent(p.Content) {
				schema = mt.Schema
				break
			}
		}
		desc := p.Description
		param := fromSchema(schemaOf(schema), desc, p.Required || k.in == openapi3.ParameterInPath)
		switch k.in {
		case openapi3.ParameterInPath:
			param.In = connectors.InPath
			pathNames[p.Name] = name
		case openapi3.ParameterInQuery:
			param.In = connectors.InQuery
		case openapi3.ParameterInHeader:
			if name == p.Name {
				param.In = connectors.InHeader
			} else {
				m.a.Headers[p.Name] = "{{params." + name + "}}" // sent under its own name
			}
		}
		m.a.Parameters[name] = param
	}

	// Path.
	var missing string
	m.a.Path = pathParamRE.ReplaceAllStringFunc(o.path, func(s string) string {
		spec := s[1 : len(s)-1]
		name, ok := pathNames[spec]
		if !ok {
			missing = spec
			return s
		}
		return "{{params." + name + "}}"
	})
	if missing != "" {
		return connectors.Action{}, fmt.Sprintf("the path names {%s}, which no path parameter declares", missing)
	}

	if reason := m.body(o); reason != "" {
		return connectors.Action{}, reason
	}
	*notes = m.notes
	return m.a, ""
}

// body maps a JSON request body: an object's top-level properties become
// body parameters, any other body one parameter "body".
func (m *mapper) body(o operation) string {
	if o.op.RequestBody == nil || o.op.RequestBody.Value == nil {
		return ""
	}
	rb := o.op.RequestBody.Value
	mt := jsonContent(rb.Content)
	switch {
	case mt == nil:
		if len(rb.Content) == 0 {
			return "" // a body without content types: nothing to send
		}
		types := make([]string, 0, len(rb.Content))
		for t := range rb.Content {
			types = append(types, t)
		}
		sort.Strings(types)
		return fmt.Sprintf("the request body is %s only; actions send JSON bodies", strings.Join(types, ", "))
	case o.method == "GET" || o.method == "HEAD":
		if rb.Required {
			return fmt.Sprintf("a %s request with a required body; actions send no body with %s", o.method, o.method)
		}
		return ""
	}
	schema := schemaOf(mt.Schema)
	props := map[string]*openapi3.Schema{}
	required := map[string]bool{}
	if objectProps(schema, 0, props, required) && len(props) > 0 {
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		template := map[string]any{}
		for _, n := range names {
			s := props[n]
			if s.ReadOnly {
				continue // never sent
			}
			name, ok := paramName(n)
			if !ok {
				return fmt.Sprintf("body property %q has no letter or digit to name it by", n)
			}
			if name, ok = m.claim(name, connectors.InBody); !ok {
				return fmt.Sprintf("body property %q: its name %q is taken by other parameters", n, name)
			}
			p := fromSchema(s, "", required[n])
			if name == n {
				p.In = connectors.InBody
			} else {
				template[n] = "{{params." + name + "}}" // sent under its own name
			}
			m.a.Parameters[name] = p
		}
		if len(template) > 0 {
			m.a.Body = template
		}
		return ""
	}
	name, ok := m.claim("body", connectors.InBody)
	if !ok {
		return "the request body: the names body and body_body are taken by other parameters"
	}
	p := fromSchema(schema, rb.Description, rb.Required)
	if schemaType(schema, 0) == "" {
		p.Type, p.Enum, p.Default = connectors.TypeObject, nil, nil // a free-form JSON body
	}
	m.a.Parameters[name] = p
	m.a.Body = "{{params." + name + "}}"
	return ""
}

// sentByCredential reports whether a parameter is the connector's
// credential (the Authorization header of bearer, basic and oauth2, or an
// apiKey's header or query parameter): the connector sends it.
func sentByCredential(a connectors.Auth, in, name string) bool {
	switch a.Type {
	case connectors.AuthBearer, connectors.AuthBasic, connectors.AuthOAuth2:
		return in == connectors.InHeader && httpCanonical(name) == "Authorization"
	case connectors.AuthAPIKey:
		if a.In != in {
			return false
		}
		if in == connectors.InHeader {
			return httpCanonical(name) == httpCanonical(a.Name)
		}
		return name == a.Name
	}
	return false
}

// describe is an operation's summary and description, bounded.
func describe(op *openapi3.Operation) string {
	summary, desc := strings.TrimSpace(op.Summary), strings.TrimSpace(op.Description)
	text := summary
	switch {
	case text == "":
		text = desc
	case desc != "" && desc != summary:
		text += "\n\n" + desc
	}
	if op.Deprecated {
		text = strings.TrimSpace("Deprecated. " + text)
	}
	return clean(text, MaxDescription, false)
}

// jsonContent is the JSON media type of a body: application/json, else
// another JSON type (+json), else */*; nil when there is none.
func jsonContent(c openapi3.Content) *openapi3.MediaType {
	if mt := c["application/json"]; mt != nil {
		return mt
	}
	for _, t := range sortedKeys(c) {
		base, _, _ := strings.Cut(strings.ToLower(t), ";")
		base = strings.TrimSpace(base)
		if base == "application/json" || strings.HasSuffix(base, "+json") || base == "*/*" || base == "application/*" {
			return c[t]
		}
	}
	return nil
}

func sortedKeys(c openapi3.Content) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedContent(c openapi3.Content) []*openapi3.MediaType {
	var out []*openapi3.MediaType
	for _, k := range sortedKeys(c) {
		if c[k] != nil {
			out = append(out, c[k])
		}
	}
	return out
}

func schemaOf(ref *openapi3.SchemaRef) *openapi3.Schema {
	if ref == nil {
		return nil
	}
	return ref.Value
}

func typesOf(s *openapi3.Schema) []string {
	if s == nil || s.Type == nil {
		return nil
	}
	return *s.Type
}

// objectProps collects the properties and required names of an object
// schema, through allOf; it reports whether the schema is an object.
func objectProps(s *openapi3.Schema, depth int, props map[string]*openapi3.Schema, required map[string]bool) bool {
	if s == nil || depth > maxSchemaDepth {
		return false
	}
	isObject := slices.Contains(typesOf(s), openapi3.TypeObject) || len(typesOf(s)) == 0 && len(s.Properties) > 0
	for n, p := range s.Properties {
		if p != nil && p.Value != nil {
			props[n] = p.Value
		}
	}
	for _, r := range s.Required {
		required[r] = true
	}
	for _, sub := range s.AllOf {
		if objectProps(schemaOf(sub), depth+1, props, required) {
			isObject = true
		}
	}
	return isObject
}

// schemaType is the parameter type of a schema: its type (the first but
// null), else what its properties, items, allOf, oneOf, anyOf or enum
// show; "" when nothing does.
func schemaType(s *openapi3.Schema, depth int) string {
	if s == nil || depth > maxSchemaDepth {
		return ""
	}
	for _, t := range typesOf(s) {
		if slices.Contains(connectors.ParameterTypes, t) {
			return t
		}
	}
	switch {
	case len(s.Properties) > 0 || s.AdditionalProperties.Has != nil && *s.AdditionalProperties.Has || s.AdditionalProperties.Schema != nil:
		return connectors.TypeObject
	case s.Items != nil:
		return connectors.TypeArray
	}
	for _, group := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
		for _, sub := range group {
			if t := schemaType(schemaOf(sub), depth+1); t != "" {
				return t
			}
		}
	}
	for _, e := range s.Enum {
		if v, ok := jsonValue(e); ok && v != nil {
			return kindOf(v)
		}
	}
	return ""
}

func kindOf(v any) string {
	switch v := v.(type) {
	case string:
		return connectors.TypeString
	case float64:
		if v == math.Trunc(v) && math.Abs(v) <= 1<<53 {
			return connectors.TypeInteger
		}
		return connectors.TypeNumber
	case bool:
		return connectors.TypeBoolean
	case []any:
		return connectors.TypeArray
	case map[string]any:
		return connectors.TypeObject
	}
	return ""
}

// fits reports whether a decoded JSON value is of parameter type typ.
func fits(typ string, v any) bool {
	switch v := v.(type) {
	case string:
		return typ == connectors.TypeString
	case float64:
		return typ == connectors.TypeNumber || typ == connectors.TypeInteger && v == math.Trunc(v) && math.Abs(v) <= 1<<53
	case bool:
		return typ == connectors.TypeBoolean
	case []any:
		return typ == connectors.TypeArray
	case map[string]any:
		return typ == connectors.TypeObject
	}
	return false
}

// fromSchema declares a parameter from its schema: type (string when the
// schema says none), description, enum and default when they fit the type
// (an enum of more than connectors.MaxEnumValues values is left out, so
// is a default on a required parameter).
func fromSchema(s *openapi3.Schema, desc string, required bool) connectors.Parameter {
	p := connectors.Parameter{Type: schemaType(s, 0), Required: required}
	if p.Type == "" {
		p.Type = connectors.TypeString
	}
	if s == nil {
		p.Description = clean(desc, MaxDescription, false)
		return p
	}
	if strings.TrimSpace(desc) == "" {
		desc = s.Description
		if desc == "" {
			desc = s.Title
		}
	}
	p.Description = clean(desc, MaxDescription, false)
	var enum []any
	seen := map[string]bool{}
	for _, e := range s.Enum {
		v, ok := jsonValue(e)
		if !ok || v == nil {
			continue // null is "not supplied" for a parameter
		}
		if !fits(p.Type, v) {
			enum = nil
			break
		}
		if k := canonical(v); !seen[k] {
			seen[k] = true
			enum = append(enum, v)
		}
	}
	if len(enum) <= connectors.MaxEnumValues {
		p.Enum = enum
	}
	if s.Default != nil && !required {
		if v, ok := jsonValue(s.Default); ok && v != nil && fits(p.Type, v) && (len(p.Enum) == 0 || seen[canonical(v)]) {
			p.Default = v
		}
	}
	return p
}

func canonical(v any) string {
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	return string(b)
}
