package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// This file holds what the provider knows of action definitions to check
// them at plan time: the `{{params.<name>}}` template syntax, the typed
// reading of enum and default values, and a JavaScript syntax check.

// placeholderRE is the inside of a placeholder: params.<identifier>,
// optionally surrounded by whitespace.
var placeholderRE = regexp.MustCompile(`^[ \t\n\r]*params\.([A-Za-z_][A-Za-z0-9_]*)[ \t\n\r]*$`)

// templateParams returns the parameters a template names, in order, or why
// it does not parse. `{{` always opens a placeholder closed by the next `}}`.
func templateParams(s string) ([]string, error) {
	var names []string
	for pos := 0; ; {
		open := strings.Index(s[pos:], "{{")
		if open < 0 {
			return names, nil
		}
		open += pos
		end := strings.Index(s[open+2:], "}}")
		if end < 0 {
			return nil, fmt.Errorf("unclosed {{ at offset %d: no matching }}", open)
		}
		end += open + 2
		inner := s[open+2 : end]
		if strings.Contains(inner, "{{") {
			return nil, fmt.Errorf("{{ inside the placeholder opened at offset %d; close it with }} first", open)
		}
		m := placeholderRE.FindStringSubmatch(inner)
		if m == nil {
			return nil, fmt.Errorf("invalid placeholder {{%s}} at offset %d; write {{params.<name>}}", inner, open)
		}
		names = append(names, m[1])
		pos = end + 2
	}
}

// templateValidator checks the syntax of a template (and, for paths, the
// literal text between placeholders).
type templateValidator struct {
	path bool
}

var _ validator.String = templateValidator{}

// template checks header template syntax.
func template() validator.String { return templateValidator{} }

// pathTemplate checks a path template: syntax, path characters and
// percent-escapes only, no query, fragment or dot segments.
func pathTemplate() validator.String { return templateValidator{path: true} }

func (v templateValidator) Description(context.Context) string {
	if v.path {
		return "must be a path template: path characters, percent-escapes and {{params.<name>}} placeholders"
	}
	return "must be a template with {{params.<name>}} placeholders"
}

func (v templateValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v templateValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	if _, err := templateParams(s); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid template", fmt.Sprintf("%s: %v.", req.Path, err))
		return
	}
	if v.path {
		if msg := checkPathLiterals(s); msg != "" {
			resp.Diagnostics.AddAttributeError(req.Path, "Invalid path template", fmt.Sprintf("%s: %s.", req.Path, msg))
		}
	}
}

// checkPathLiterals says what is wrong with the literal text of a parsed
// path template, or "".
func checkPathLiterals(s string) string {
	var canon strings.Builder
	for pos := 0; pos < len(s); {
		if strings.HasPrefix(s[pos:], "{{") {
			end := strings.Index(s[pos+2:], "}}") + pos + 4
			canon.WriteString("{{p}}")
			pos = end
			continue
		}
		c := s[pos]
		switch {
		case c == '?' || c == '#':
			return fmt.Sprintf("%q at offset %d: a path has no query or fragment; declare query parameters with in = \"query\"", c, pos)
		case c == '%':
			if pos+2 >= len(s) || !isHex(s[pos+1]) || !isHex(s[pos+2]) {
				return fmt.Sprintf("invalid percent-escape at offset %d", pos)
			}
		case !isPathChar(c):
			return fmt.Sprintf("character %q at offset %d is not allowed in a path; percent-encode it", c, pos)
		}
		canon.WriteByte(c)
		pos++
	}
	for _, seg := range strings.Split(canon.String(), "/") {
		if seg == "." || seg == ".." {
			return "must not contain . or .. segments"
		}
	}
	return ""
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isPathChar reports whether c may appear unescaped in a URL path.
func isPathChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0
}

// bodyTemplateValidator checks that every string in a JSON body template
// is a valid template (the JSON syntax itself is checked by the type).
type bodyTemplateValidator struct{}

var _ validator.String = bodyTemplateValidator{}

// bodyTemplate checks the templates in a JSON body.
func bodyTemplate() validator.String { return bodyTemplateValidator{} }

func (bodyTemplateValidator) Description(context.Context) string {
	return "string values must be valid templates"
}

func (v bodyTemplateValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (bodyTemplateValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	var body any
	if json.Unmarshal([]byte(req.ConfigValue.ValueString()), &body) != nil {
		return // the JSON type reports it
	}
	walkStrings(body, func(s string) {
		if _, err := templateParams(s); err != nil {
			resp.Diagnostics.AddAttributeError(req.Path, "Invalid template in body", fmt.Sprintf("%q: %v.", s, err))
		}
	})
}

// walkStrings calls fn with every string in a decoded JSON value (object
// keys excluded).
func walkStrings(v any, fn func(string)) {
	switch v := v.(type) {
	case string:
		fn(v)
	case []any:
		for _, e := range v {
			walkStrings(e, fn)
		}
	case map[string]any:
		for _, e := range v {
			walkStrings(e, fn)
		}
	}
}

// javaScriptValidator compiles a transformation the way the server wraps
// it, the body of `function(data, response)` in strict mode, to report
// syntax errors at plan time with the line and column in the script.
type javaScriptValidator struct{}

var _ validator.String = javaScriptValidator{}

// javaScript checks a transformation's syntax.
func javaScript() validator.String { return javaScriptValidator{} }

func (javaScriptValidator) Description(context.Context) string {
	return "must be the body of a JavaScript function of (data, response)"
}

func (v javaScriptValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

// jsHead wraps a transformation; its newline puts the script on line 2.
const jsHead = "(function(data, response) {\n"

func (javaScriptValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if msg := checkJavaScript(req.ConfigValue.ValueString()); msg != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Transformation does not compile", msg)
	}
}

// checkJavaScript says why script does not compile, or "".
func checkJavaScript(script string) string {
	prog, err := parser.ParseFile(nil, "transformation", jsHead+script+"\n})", 0, parser.WithDisableSourceMaps)
	if err != nil {
		var list parser.ErrorList
		if errors.As(err, &list) && len(list) > 0 {
			p := list[0].Position
			return fmt.Sprintf("line %d, column %d: %s", max(p.Line-1, 1), p.Column, list[0].Message)
		}
		return err.Error()
	}
	if len(prog.Body) != 1 {
		return "the script closes the function it is the body of; a transformation is only a function body"
	}
	if _, err := goja.CompileAST(prog, true); err != nil {
		var se *goja.CompilerSyntaxError
		if errors.As(err, &se) && se.File != nil {
			p := se.File.Position(se.Offset)
			return fmt.Sprintf("line %d, column %d: %s", max(p.Line-1, 1), p.Column, se.Message)
		}
		return err.Error()
	}
	return ""
}

// parseParamValue reads an enum or default value written as a string as
// the parameter's type.
func parseParamValue(typ, s string) (any, error) {
	switch typ {
	case "string":
		return s, nil
	case "number", "integer":
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("%q is not a %s", s, typ)
		}
		if typ == "integer" && (f != math.Trunc(f) || math.Abs(f) > 1<<53) {
			return nil, fmt.Errorf("%q is not an integer within ±2^53", s)
		}
		return f, nil
	case "boolean":
		switch s {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("%q is not a boolean (true or false)", s)
	case "array", "object":
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("%q is not JSON (write %s values with jsonencode): %v", s, typ, err)
		}
		_, isArray := v.([]any)
		_, isObject := v.(map[string]any)
		if typ == "array" && !isArray || typ == "object" && !isObject {
			return nil, fmt.Errorf("%s is not a JSON %s", s, typ)
		}
		return v, nil
	}
	return nil, fmt.Errorf("unknown parameter type %q", typ)
}

// formatParamValue writes a server value as a string, keeping the prior
// spelling when it reads as the same value.
func formatParamValue(typ string, v any, prior types.String) types.String {
	if !prior.IsNull() && !prior.IsUnknown() {
		if p, err := parseParamValue(typ, prior.ValueString()); err == nil && canonicalJSON(p) == canonicalJSON(v) {
			return prior
		}
	}
	switch v := v.(type) {
	case string:
		return types.StringValue(v)
	case float64:
		return types.StringValue(strconv.FormatFloat(v, 'f', -1, 64))
	case bool:
		return types.StringValue(strconv.FormatBool(v))
	}
	return types.StringValue(canonicalJSON(v))
}

// canonicalJSON is v as compact JSON with sorted object keys.
func canonicalJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// containsJSON reports whether list holds a value equal to v as JSON.
func containsJSON(list []any, v any) bool {
	c := canonicalJSON(v)
	return slices.ContainsFunc(list, func(e any) bool { return canonicalJSON(e) == c })
}
