package server

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// checkNames reads the JSON value in data alongside the Go type of v (a
// pointer) and refuses, before any decoder sees the body:
//
//   - a name that appears twice in one object, at any depth (in a struct,
//     a map such as params, or a free-form value): decoders keep the last
//     one, so a body could say two things at once;
//   - a name that matches a struct field only when case is ignored
//     ("SCOPES" for "scopes"): both decoders would fill the field;
//   - with strict, any other name a struct does not declare: the first such
//     name is returned as unknown, not refused, and the rest of the body is
//     checked, so that the caller can report an error that comes earlier
//     in the body (a wrong type) first.
//
// Names are compared as decoders read them (escapes undone, invalid UTF-8
// replaced). A type with its own UnmarshalJSON or UnmarshalText (time.Time,
// json.RawMessage) is read for duplicates only. Malformed JSON is left to
// the decoders, whose errors say where it went wrong; nesting deeper than
// maxJSONDepth is refused here.
func checkNames(data []byte, v any, strict bool) (refused, unknown error) {
	t := reflect.TypeOf(v)
	if t == nil {
		return nil, nil
	}
	c := checkers.Get().(*nameChecker)
	c.data, c.i, c.strict = data, 0, strict
	err := c.value(shapeOf(t), 0)
	unknown = c.unknownErr
	c.data, c.keys, c.path, c.unknownErr = nil, c.keys[:0], c.path[:0], nil
	checkers.Put(c)
	if errors.Is(err, errMalformed) {
		err = nil
	}
	return err, unknown
}

// maxJSONDepth is the deepest nesting of objects and arrays a body may have
// (encoding/json's own limit).
const maxJSONDepth = 10000

// errMalformed stops the check at JSON the decoders will refuse.
var errMalformed = errors.New("malformed JSON")

// shape is what checkNames knows of a Go type.
type shape struct {
	kind   shapeKind
	fields map[string]*shape // object: the JSON names of the struct's fields
	names  []string          // object: the same names, for a case-insensitive hint
	elem   *shape            // mapOf: the values; listOf: the items
}

type shapeKind uint8

const (
	opaque shapeKind = iota // any value; only duplicate names are checked
	object                  // a struct: exact names
	mapOf                   // a map: any name
	listOf                  // a slice or array
)

var (
	shapes       sync.Map // reflect.Type → *shape
	anyShape     = &shape{}
	unmarshalers = []reflect.Type{reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()}
)

func shapeOf(t reflect.Type) *shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	s := buildShape(t, map[reflect.Type]*shape{})
	shapes.Store(t, s)
	return s
}

// buildShape describes t; building holds the shapes under construction, so
// that a recursive type refers to itself.
func buildShape(t reflect.Type, building map[reflect.Type]*shape) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := building[t]; ok {
		return s
	}
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	for _, u := range unmarshalers {
		if reflect.PointerTo(t).Implements(u) {
			return anyShape
		}
	}
	s := &shape{}
	building[t] = s
	switch t.Kind() {
	case reflect.Struct:
		s.kind, s.fields = object, map[string]*shape{}
		addFields(s, t, building)
	case reflect.Map:
		s.kind, s.elem = mapOf, buildShape(t.Elem(), building)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			break // bytes: a base64 string
		}
		s.kind, s.elem = listOf, buildShape(t.Elem(), building)
	}
	return s
}

// addFields adds the JSON names of t's fields to s as encoding/json names
// them (tag name, else the Go name; "-" left out), then those of embedded
// structs that no shallower field took.
func addFields(s *shape, t reflect.Type, building map[reflect.Type]*shape) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := s.fields[name]; !taken {
			s.fields[name] = buildShape(f.Type, building)
			s.names = append(s.names, name)
		}
	}
	for _, et := range embedded {
		addFields(s, et, building)
	}
}

// fold returns the field name that key matches when case is ignored.
func (s *shape) fold(key []byte) string {
	for _, n := range s.names {
		if strings.EqualFold(n, string(key)) {
			return n
		}
	}
	return ""
}

// nameChecker is one run of checkNames over data.
type nameChecker struct {
	data   []byte
	i      int
	strict bool
	keys   [][]byte   // the names read so far in each open object
	path   []pathStep // where the reader is, for messages
	// unknownErr describes the first name a struct does not declare.
	unknownErr error
}

// pathStep is a member name, or an array index when key is nil.
type pathStep struct {
	key   []byte
	index int
}

var checkers = sync.Pool{New: func() any { return new(nameChecker) }}

// smallObject is how many names an object may have before duplicates are
// looked up in a map rather than by comparing with each earlier name.
const smallObject = 16

func (c *nameChecker) ws() {
	for c.i < len(c.data) {
		switch c.data[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *nameChecker) value(s *shape, depth int) error {
	c.ws()
	if c.i >= len(c.data) {
		return errMalformed
	}
	switch c.data[c.i] {
	case '{':
		if depth >= maxJSONDepth {
			return c.tooDeep()
		}
		return c.object(s, depth+1)
	case '[':
		if depth >= maxJSONDepth {
			return c.tooDeep()
		}
		return c.array(s, depth+1)
	case '"':
		return c.skipString()
	}
	// A number or a literal: up to the next delimiter.
	start := c.i
	for c.i < len(c.data) {
		switch c.data[c.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if c.i == start {
				return errMalformed
			}
			return nil
		}
		c.i++
	}
	return nil
}

// skipString moves past the string at c.i.
func (c *nameChecker) skipString() error {
	c.i++
	for {
		q := bytes.IndexByte(c.data[c.i:], '"')
		if q < 0 {
			return errMalformed
		}
		b := bytes.IndexByte(c.data[c.i:c.i+q], '\\')
		if b < 0 {
			c.i += q + 1
			return nil
		}
		c.i += b + 2 // the backslash and the byte it escapes
		if c.i > len(c.data) {
			return errMalformed
		}
	}
}

// key reads the member name at c.i and returns it as decoders read it.
func (c *nameChecker) key() ([]byte, error) {
	if c.i >= len(c.data) || c.data[c.i] != '"' {
		return nil, errMalformed
	}
	start := c.i
	c.i++
	plain := true
	for ; c.i < len(c.data); c.i++ {
		switch b := c.data[c.i]; {
		case b == '"':
			c.i++
			if plain {
				return c.data[start+1 : c.i-1], nil
			}
			var k string // escapes or non-ASCII: decoded as encoding/json does
			if json.Unmarshal(c.data[start:c.i], &k) != nil {
				return nil, errMalformed
			}
			return []byte(k), nil
		case b == '\\':
			plain = false
			c.i++
		case b >= 0x80:
			plain = false
		}
	}
	return nil, errMalformed
}

func (c *nameChecker) object(s *shape, depth int) error {
	c.i++ // {
	first := len(c.keys)
	defer func() { c.keys = c.keys[:first] }()
	var seen map[string]struct{}
	if c.closes('}') {
		return nil
	}
	for {
		c.ws()
		k, err := c.key()
		if err != nil {
			return err
		}
		c.ws()
		if c.i >= len(c.data) || c.data[c.i] != ':' {
			return errMalformed
		}
		c.i++
		if seen != nil {
			if _, dup := seen[string(k)]; dup {
				return c.duplicate(k)
			}
			seen[string(k)] = struct{}{}
		} else {
			for _, prev := range c.keys[first:] {
				if bytes.Equal(prev, k) {
					return c.duplicate(k)
				}
			}
			c.keys = append(c.keys, k)
			if len(c.keys)-first > smallObject {
				seen = make(map[string]struct{}, 2*smallObject)
				for _, prev := range c.keys[first:] {
					seen[string(prev)] = struct{}{}
				}
			}
		}
		child := anyShape
		switch s.kind {
		case object:
			if f, ok := s.fields[string(k)]; ok {
				child = f
			} else if name := s.fold(k); name != "" {
				return c.wrongCase(k, name)
			} else if c.strict && c.unknownErr == nil {
				c.unknownErr = c.unknown(k)
			}
		case mapOf:
			child = s.elem
		}
		c.path = append(c.path, pathStep{key: k})
		err = c.value(child, depth)
		c.path = c.path[:len(c.path)-1]
		if err != nil {
			return err
		}
		if more, err := c.separator('}'); !more {
			return err
		}
	}
}

func (c *nameChecker) array(s *shape, depth int) error {
	c.i++ // [
	item := anyShape
	if s.kind == listOf {
		item = s.elem
	}
	if c.closes(']') {
		return nil
	}
	c.path = append(c.path, pathStep{})
	defer func() { c.path = c.path[:len(c.path)-1] }()
	for n := 0; ; n++ {
		c.path[len(c.path)-1].index = n
		if err := c.value(item, depth); err != nil {
			return err
		}
		if more, err := c.separator(']'); !more {
			return err
		}
	}
}

// closes reads past whitespace and, when the container ends there (an
// empty object or array), past its closing byte.
func (c *nameChecker) closes(end byte) bool {
	c.ws()
	if c.i < len(c.data) && c.data[c.i] == end {
		c.i++
		return true
	}
	return false
}

// separator reads what follows a member or element: a comma (more to
// come), the container's closing byte end (done), or anything else
// (errMalformed).
func (c *nameChecker) separator(end byte) (more bool, err error) {
	c.ws()
	if c.i >= len(c.data) {
		return false, errMalformed
	}
	switch c.data[c.i] {
	case ',':
		c.i++
		return true, nil
	case end:
		c.i++
		return false, nil
	}
	return false, errMalformed
}

// where is the JSON path of member k of the object being read, e.g.
// auth.type, messages[2].role or params["a.b"].
func (c *nameChecker) where(k []byte) string {
	var b strings.Builder
	for _, st := range append(c.path, pathStep{key: k}) {
		switch {
		case st.key == nil:
			b.WriteString("[" + strconv.Itoa(st.index) + "]")
		case plainName(st.key):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(st.key)
		default:
			b.WriteString("[" + strconv.Quote(string(st.key)) + "]")
		}
	}
	return b.String()
}

// plainName reports whether k reads unambiguously in a dotted path.
func plainName(k []byte) bool {
	if len(k) == 0 {
		return false
	}
	for _, r := range string(k) {
		if r < 0x20 || r == 0x7f || r == '.' || r == '[' || r == ']' || r == '"' || r == 0xfffd {
			return false
		}
	}
	return true
}

// at says where a member is when it is not at the top level.
func (c *nameChecker) at(path string) string {
	if len(c.path) == 0 {
		return ""
	}
	return " at " + path
}

func (c *nameChecker) duplicate(k []byte) error {
	path := c.where(k)
	return errs.E(errs.Invalid, "duplicate key %q%s: a name may appear only once in an object", k, c.at(path)).
		WithDetails(map[string]any{"problems": []errs.Problem{{Field: path, Problem: fmt.Sprintf("duplicate key %q", k)}}})
}

func (c *nameChecker) wrongCase(k []byte, name string) error {
	path := c.where(k)
	return errs.E(errs.Invalid, "unknown field %q%s: field names are case-sensitive; did you mean %q?", k, c.at(path), name).
		WithDetails(map[string]any{"problems": []errs.Problem{{Field: path, Problem: fmt.Sprintf("unknown field %q; did you mean %q?", k, name)}}})
}

func (c *nameChecker) unknown(k []byte) error {
	path := c.where(k)
	return errs.E(errs.Invalid, "unknown field %q%s", k, c.at(path)).
		WithDetails(map[string]any{"problems": []errs.Problem{{Field: path, Problem: "unknown field"}}})
}

func (c *nameChecker) tooDeep() error {
	return errs.E(errs.Invalid, "malformed JSON: nested more than %d levels deep at offset %d", maxJSONDepth, c.i)
}
