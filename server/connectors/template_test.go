package connectors_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
)

type seg = connectors.Segment

func lit(s string, off int) seg      { return seg{Literal: s, Offset: off} }
func param(name string, off int) seg { return seg{Param: name, Offset: off} }

func TestParseTemplate(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []seg
	}{
		{"empty", "", nil},
		{"literal only", "/v1/items", []seg{lit("/v1/items", 0)}},
		{"one placeholder", "{{params.id}}", []seg{param("id", 0)}},
		{"placeholder in a path", "/items/{{params.id}}/x", []seg{lit("/items/", 0), param("id", 7), lit("/x", 20)}},
		{"whitespace inside braces", "{{ params.city\t}}", []seg{param("city", 0)}},
		{"newlines inside braces", "{{\n params.city \r\n}}", []seg{param("city", 0)}},
		{"adjacent placeholders", "{{params.a}}{{params.b}}", []seg{param("a", 0), param("b", 12)}},
		{"repeated parameter", "{{params.a}}-{{params.a}}", []seg{param("a", 0), lit("-", 12), param("a", 13)}},
		{"stray close is literal", "a}}b", []seg{lit("a}}b", 0)}},
		{"close after a placeholder", "{{params.a}}}}", []seg{param("a", 0), lit("}}", 12)}},
		{"single braces are literal", `{"a": {b}}`, []seg{lit(`{"a": {b}}`, 0)}},
		{"camelCase and underscores", "{{params.pageSize}}{{params._x1}}", []seg{param("pageSize", 0), param("_x1", 19)}},
		{"unicode literal", "/é/{{params.x}}", []seg{lit("/é/", 0), param("x", 4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := connectors.ParseTemplate(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Segments, tc.want) {
				t.Errorf("segments = %#v, want %#v", got.Segments, tc.want)
			}
		})
	}
}

func TestParseTemplateErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		offset  int
		message string
	}{
		{"unclosed", "/a/{{params.id", 3, "unclosed {{"},
		{"unclosed with single brace", "{{params.id}", 0, "unclosed {{"},
		{"nested open", "{{params.a {{params.b}}", 11, "{{ inside the placeholder opened at offset 0"},
		{"empty", "x{{}}", 1, "empty placeholder"},
		{"blank", "{{  }}", 0, "empty placeholder"},
		{"unknown root", "{{ env.HOME }}", 3, `unknown root "env"`},
		{"root without name", "{{params}}", 8, "expected . and a parameter name"},
		{"empty name", "{{params.}}", 9, "invalid parameter name"},
		{"name starting with a digit", "{{params.1a}}", 9, `invalid parameter name "1a"`},
		{"name with a dash", "{{params.a-b}}", 10, `unexpected '-' after params.a`},
		{"nested path", "{{params.a.b}}", 10, "params.a cannot be indexed"},
		{"index", "{{params.a[0]}}", 10, "params.a cannot be indexed"},
		{"two names", "{{params.a params.b}}", 11, "unexpected 'p' after params.a"},
		{"triple brace", "{{{params.a}}}", 2, "unexpected '{'"},
		{"non-ASCII name", "{{params.é}}", 9, "invalid parameter name"},
		{"expression", "{{params.a + 1}}", 11, "unexpected '+'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := connectors.ParseTemplate(tc.in)
			var te *connectors.TemplateError
			if !errors.As(err, &te) {
				t.Fatalf("err = %v, want *TemplateError", err)
			}
			if te.Offset != tc.offset || !strings.Contains(te.Message, tc.message) {
				t.Errorf("error = offset %d %q, want offset %d containing %q", te.Offset, te.Message, tc.offset, tc.message)
			}
			if !strings.Contains(err.Error(), "offset") {
				t.Errorf("Error() = %q does not give the offset", err)
			}
		})
	}
}

func TestTemplateAccessors(t *testing.T) {
	tpl, err := connectors.ParseTemplate("/{{ params.a }}/{{params.b}}/{{params.a}}")
	if err != nil {
		t.Fatal(err)
	}
	if got := tpl.Params(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Params = %v", got)
	}
	if got := tpl.String(); got != "/{{params.a}}/{{params.b}}/{{params.a}}" {
		t.Errorf("String = %q", got)
	}
	if _, ok := tpl.SingleParam(); ok {
		t.Error("SingleParam of a path with literals")
	}
	out, err := tpl.Expand(func(p string) (string, error) { return strings.ToUpper(p), nil })
	if err != nil || out != "/A/B/A" {
		t.Errorf("Expand = %q, %v", out, err)
	}
	one, _ := connectors.ParseTemplate(" {{params.n}}")
	if _, ok := one.SingleParam(); ok {
		t.Error("SingleParam with a leading space")
	}
	one, _ = connectors.ParseTemplate("{{ params.n }}")
	if name, ok := one.SingleParam(); !ok || name != "n" {
		t.Errorf("SingleParam = %q, %v", name, ok)
	}
}

func TestRenderBody(t *testing.T) {
	body := map[string]any{
		"q":       "{{params.q}}",
		"limit":   "{{ params.limit }}",
		"missing": "{{params.absent}}",
		"text":    "city={{params.q}} n={{params.limit}} tags={{params.tags}} none={{params.absent}}",
		"nested":  []any{"{{params.flag}}", "{{params.absent}}", 3.5, nil, map[string]any{"o": "{{params.obj}}"}},
		"fixed":   true,
	}
	params := map[string]any{"q": "Zürich", "limit": float64(5), "flag": false, "tags": []any{"a", "b"}, "obj": map[string]any{"k": "v"}}
	got, err := connectors.RenderBody(body, params)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"q":      "Zürich",
		"limit":  float64(5),
		"text":   `city=Zürich n=5 tags=["a","b"] none=`,
		"nested": []any{false, nil, 3.5, nil, map[string]any{"o": map[string]any{"k": "v"}}},
		"fixed":  true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RenderBody = %#v\nwant %#v", got, want)
	}
	if body["q"] != "{{params.q}}" {
		t.Error("RenderBody modified its input")
	}
}

func TestWalkBody(t *testing.T) {
	var paths []string
	err := connectors.WalkBody(map[string]any{"b": []any{"x", map[string]any{"a b": "y"}}, "a": "z", "n": 1.0}, "body", func(p, s string) error {
		paths = append(paths, p+"="+s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"body.a=z", "body.b[0]=x", `body.b[1]["a b"]=y`}
	if !slices.Equal(paths, want) {
		t.Errorf("paths = %v, want %v", paths, want)
	}
}

// FuzzParseTemplate checks that the parser never panics, that what it
// accepts round-trips through the canonical form, and that its errors point
// inside the input.
func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{
		"", "/items/{{params.id}}", "{{ params.a }}{{params.b}}", "a}}b", "{{", "}}", "{{}}",
		"{{params.}}", "{{env.x}}", "{{params.a.b}}", "{{{params.a}}}", "{{params.a}}}}",
		"x{{ params.é }}", "{{params.a {{params.b}}", "\x00{{\n\tparams._Z9\r}}\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := connectors.ParseTemplate(s)
		if err != nil {
			var te *connectors.TemplateError
			if !errors.As(err, &te) {
				t.Fatalf("error %v is not a *TemplateError", err)
			}
			if te.Offset < 0 || te.Offset > len(s) {
				t.Fatalf("offset %d outside the input (%d bytes)", te.Offset, len(s))
			}
			if !strings.Contains(s, "{{") {
				t.Fatalf("%q has no {{ but fails: %v", s, err)
			}
			return
		}
		if !strings.Contains(s, "{{") {
			if s == "" && len(tpl.Segments) != 0 || s != "" && (len(tpl.Segments) != 1 || tpl.Segments[0].Literal != s) {
				t.Fatalf("%q without {{ parsed as %#v", s, tpl.Segments)
			}
		}
		prevEnd := 0
		for i, sg := range tpl.Segments {
			if sg.Offset < prevEnd || sg.Offset > len(s) {
				t.Fatalf("segment %d offset %d out of order", i, sg.Offset)
			}
			if sg.IsPlaceholder() {
				if !strings.HasPrefix(s[sg.Offset:], "{{") {
					t.Fatalf("placeholder %d does not start at {{", i)
				}
				prevEnd = sg.Offset + 2
				continue
			}
			if sg.Literal == "" || strings.Contains(sg.Literal, "{{") {
				t.Fatalf("literal %d = %q", i, sg.Literal)
			}
			if i > 0 && !tpl.Segments[i-1].IsPlaceholder() {
				t.Fatalf("adjacent literals at %d", i)
			}
			if !strings.HasPrefix(s[sg.Offset:], sg.Literal) {
				t.Fatalf("literal %d = %q is not the input at offset %d", i, sg.Literal, sg.Offset)
			}
			prevEnd = sg.Offset + len(sg.Literal)
		}
		// Round trip: the canonical form parses to the same segments and
		// is its own canonical form.
		canon := tpl.String()
		again, err := connectors.ParseTemplate(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, s, err)
		}
		if again.String() != canon || !sameSegments(again.Segments, tpl.Segments) {
			t.Fatalf("round trip of %q: %#v != %#v", s, again.Segments, tpl.Segments)
		}
		// Without whitespace inside braces the input is already canonical.
		if !strings.ContainsAny(s, " \t\r\n") && canon != s {
			t.Fatalf("String() = %q, want the input %q", canon, s)
		}
	})
}

func sameSegments(a, b []connectors.Segment) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Literal != b[i].Literal || a[i].Param != b[i].Param {
			return false
		}
	}
	return true
}
