package connectors

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Templates.
//
// A template is text with placeholders `{{params.<name>}}`; whitespace is
// allowed inside the braces (`{{ params.city }}`). `{{` always opens a
// placeholder, which must be closed by the next `}}`; there is no escape for
// a literal `{{` (send it as a parameter's value instead). A `}}` outside a
// placeholder is literal text. The only root is `params`; <name> is an
// identifier: a letter or underscore, then letters, digits or underscores.

// Template is a parsed template: literal and placeholder segments in order.
// Adjacent literals are merged and literal segments are never empty, so a
// template has one canonical form (String).
type Template struct {
	Segments []Segment
}

// Segment is one piece of a template: literal text, or a placeholder naming
// a parameter.
type Segment struct {
	// Literal is the text of a literal segment.
	Literal string
	// Param is the parameter a placeholder names; empty for a literal.
	Param string
	// Offset is the byte offset in the source where the segment starts.
	Offset int
}

// IsPlaceholder reports whether s is a placeholder.
func (s Segment) IsPlaceholder() bool { return s.Param != "" }

// TemplateError is a template that does not parse; Offset is the byte
// offset in the template where the problem is.
type TemplateError struct {
	Offset  int
	Message string
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("template error at offset %d: %s", e.Offset, e.Message)
}

const (
	openDelim  = "{{"
	closeDelim = "}}"
	rootParams = "params"
)

// ParseTemplate parses s. A failure is a *TemplateError.
func ParseTemplate(s string) (Template, error) {
	var t Template
	pos := 0
	for pos < len(s) {
		open := strings.Index(s[pos:], openDelim)
		if open < 0 {
			t.addLiteral(s[pos:], pos)
			break
		}
		open += pos
		if open > pos {
			t.addLiteral(s[pos:open], pos)
		}
		inner := open + len(openDelim)
		end := strings.Index(s[inner:], closeDelim)
		if end < 0 {
			return Template{}, &TemplateError{Offset: open, Message: "unclosed {{: no matching }}"}
		}
		end += inner
		if nested := strings.Index(s[inner:end], openDelim); nested >= 0 {
			return Template{}, &TemplateError{Offset: inner + nested, Message: fmt.Sprintf("{{ inside the placeholder opened at offset %d; close it with }} first", open)}
		}
		name, err := parsePlaceholder(s, inner, end)
		if err != nil {
			return Template{}, err
		}
		t.Segments = append(t.Segments, Segment{Param: name, Offset: open})
		pos = end + len(closeDelim)
	}
	return t, nil
}

func (t *Template) addLiteral(text string, offset int) {
	if n := len(t.Segments); n > 0 && !t.Segments[n-1].IsPlaceholder() {
		t.Segments[n-1].Literal += text
		return
	}
	t.Segments = append(t.Segments, Segment{Literal: text, Offset: offset})
}

// parsePlaceholder parses s[from:to], the inside of {{ }}: optional
// whitespace, params.<name>, optional whitespace.
func parsePlaceholder(s string, from, to int) (string, error) {
	i := from
	skipSpace := func() {
		for i < to && isTemplateSpace(s[i]) {
			i++
		}
	}
	skipSpace()
	if i == to {
		return "", &TemplateError{Offset: from - len(openDelim), Message: "empty placeholder; write {{params.<name>}}"}
	}
	rootStart := i
	for i < to && isIdentChar(s[i]) {
		i++
	}
	root := s[rootStart:i]
	switch {
	case root == "":
		return "", &TemplateError{Offset: i, Message: fmt.Sprintf("unexpected %s in placeholder; expected params.<name>", quoteByte(s[i]))}
	case root != rootParams:
		return "", &TemplateError{Offset: rootStart, Message: fmt.Sprintf("unknown root %q in placeholder; only params.<name> is supported", root)}
	}
	if i == to || s[i] != '.' {
		return "", &TemplateError{Offset: i, Message: "expected . and a parameter name after params (params.<name>)"}
	}
	i++
	nameStart := i
	for i < to && isIdentChar(s[i]) {
		i++
	}
	name := s[nameStart:i]
	switch {
	case name == "":
		what := "end of placeholder"
		if i < to {
			what = quoteByte(s[i])
		}
		return "", &TemplateError{Offset: i, Message: fmt.Sprintf("invalid parameter name: expected a letter or underscore after params., got %s", what)}
	case !isIdentStart(name[0]):
		return "", &TemplateError{Offset: nameStart, Message: fmt.Sprintf("invalid parameter name %q: must start with a letter or underscore", name)}
	}
	skipSpace()
	if i < to {
		msg := fmt.Sprintf("unexpected %s after params.%s; a placeholder names exactly one parameter", quoteByte(s[i]), name)
		if s[i] == '.' || s[i] == '[' {
			msg = fmt.Sprintf("params.%s cannot be indexed; a placeholder names exactly one parameter", name)
		}
		return "", &TemplateError{Offset: i, Message: msg}
	}
	return name, nil
}

func isTemplateSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isIdentChar(c byte) bool { return isIdentStart(c) || '0' <= c && c <= '9' }

func quoteByte(c byte) string {
	if c < 0x80 {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// String returns the canonical text of t: literals as they are, placeholders
// as {{params.<name>}}. ParseTemplate(t.String()) yields t's segments again.
func (t Template) String() string {
	var b strings.Builder
	for _, s := range t.Segments {
		if s.IsPlaceholder() {
			b.WriteString(openDelim + rootParams + "." + s.Param + closeDelim)
		} else {
			b.WriteString(s.Literal)
		}
	}
	return b.String()
}

// Params lists the distinct parameters t names, in order of first use.
func (t Template) Params() []string {
	var out []string
	for _, s := range t.Segments {
		if s.IsPlaceholder() && !slices.Contains(out, s.Param) {
			out = append(out, s.Param)
		}
	}
	return out
}

// SingleParam reports whether t is exactly one placeholder and nothing
// else, and which parameter it names. In a body template such a string is
// replaced by the parameter's typed value rather than its text.
func (t Template) SingleParam() (string, bool) {
	if len(t.Segments) == 1 && t.Segments[0].IsPlaceholder() {
		return t.Segments[0].Param, true
	}
	return "", false
}

// HasPlaceholders reports whether t names any parameter.
func (t Template) HasPlaceholders() bool {
	for _, s := range t.Segments {
		if s.IsPlaceholder() {
			return true
		}
	}
	return false
}

// Expand renders t: literals as they are, each placeholder as value returns
// it for the parameter (escaped as the caller's context needs).
func (t Template) Expand(value func(param string) (string, error)) (string, error) {
	var b strings.Builder
	for _, s := range t.Segments {
		if !s.IsPlaceholder() {
			b.WriteString(s.Literal)
			continue
		}
		v, err := value(s.Param)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// WalkBody calls fn for every string leaf of a JSON body template (as
// decoded by encoding/json: maps, slices, strings, numbers, booleans, nil),
// with its JSON path below path (e.g. "body.items[0].name"). Object members
// are visited in key order. It stops at the first error fn returns.
func WalkBody(body any, path string, fn func(path, s string) error) error {
	switch v := body.(type) {
	case string:
		return fn(path, v)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := WalkBody(v[k], FieldPath(path, k), fn); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := WalkBody(e, path+"["+strconv.Itoa(i)+"]", fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// RenderBody renders a body template with the parameter values params:
//   - a string that is exactly one placeholder becomes the parameter's
//     value with its JSON type; when the parameter has no value, an object
//     member holding it is left out and an array element becomes null;
//   - any other string has each placeholder replaced by the value's text: a
//     string as it is, anything else as JSON, nothing for a missing value;
//   - other values are copied as they are.
//
// body is not modified.
func RenderBody(body any, params map[string]any) (any, error) {
	v, _, err := renderBody(body, params)
	return v, err
}

// renderBody returns the rendered value and whether it is present.
func renderBody(body any, params map[string]any) (any, bool, error) {
	switch v := body.(type) {
	case string:
		t, err := ParseTemplate(v)
		if err != nil {
			return nil, false, err
		}
		if name, ok := t.SingleParam(); ok {
			val, ok := params[name]
			return val, ok, nil
		}
		s, err := t.Expand(func(name string) (string, error) { return valueText(params[name]) })
		return s, true, err
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			r, ok, err := renderBody(e, params)
			if err != nil {
				return nil, false, err
			}
			if ok {
				out[k] = r
			}
		}
		return out, true, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			r, _, err := renderBody(e, params)
			if err != nil {
				return nil, false, err
			}
			out[i] = r
		}
		return out, true, nil
	}
	return body, true, nil
}

// valueText is a parameter value as text inside a larger string.
func valueText(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("parameter value: %w", err)
	}
	return string(b), nil
}

// FieldPath appends key to a JSON path: "a.key", or a["key"] when key is
// not a plain name.
func FieldPath(path, key string) string {
	plain := key != ""
	for i := 0; i < len(key); i++ {
		if c := key[i]; !isIdentChar(c) && c != '-' {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}
