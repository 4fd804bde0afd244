package provider

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestTemplateParams(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"/forecast", nil, ""},
		{"/forecast/{{params.city}}", []string{"city"}, ""},
		{"{{ params.a }}-{{params._b2}}", []string{"a", "_b2"}, ""},
		{"a }} b", nil, ""},
		{"/x/{{params.city", nil, "unclosed {{"},
		{"{{params.a {{params.b}}", nil, "inside the placeholder"},
		{"{{city}}", nil, "invalid placeholder"},
		{"{{params.}}", nil, "invalid placeholder"},
		{"{{params.a.b}}", nil, "invalid placeholder"},
		{"{{env.HOME}}", nil, "invalid placeholder"},
		{"{{}}", nil, "invalid placeholder"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := templateParams(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("templateParams(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func FuzzTemplateParams(f *testing.F) {
	for _, s := range []string{"/a/{{params.b}}", "{{ params.x }}{{", "}}{{params._}}", "{{params.a{{"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := templateParams(s)
		if err != nil {
			return
		}
		for _, n := range names {
			if !strings.Contains(s, n) || !parameterNamePattern.MatchString(n) && len(n) <= 64 {
				t.Fatalf("%q: bad name %q", s, n)
			}
		}
		// A template that parses has as many placeholders as names.
		if c := strings.Count(s, "{{"); c != len(names) {
			t.Fatalf("%q: %d openings, %d names", s, c, len(names))
		}
		_ = checkPathLiterals(s) // must not panic
	})
}

func TestCheckPathLiterals(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/forecast/{{params.city}}", ""},
		{"/a%20b/c:d@e", ""},
		{"/a?b=1", "no query"},
		{"/a#frag", "no query or fragment"},
		{"/a%2", "invalid percent-escape"},
		{"/a%zz", "invalid percent-escape"},
		{"/a b", "not allowed in a path"},
		{"/a/../b", ". or .. segments"},
		{"/a/./{{params.x}}", ". or .. segments"},
		{"/a/..{{params.x}}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := checkPathLiterals(tt.in)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("checkPathLiterals(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestCheckJavaScript(t *testing.T) {
	tests := []struct{ name, script, want string }{
		{"fine", "return {temp: data.current.temp_c};", ""},
		{"uses response", "if (response.status !== 200) { throw new Error('x'); }\nreturn data;", ""},
		{"syntax error line 2", "var a = 1;\nreturn {a: };", "line 2, column"},
		{"strict mode", "with (data) { return a; }", "line 1, column 1: Strict mode"},
		{"escapes the wrapper", "return 1; }); (function() {", "only a function body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkJavaScript(tt.script)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("checkJavaScript = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParamValues(t *testing.T) {
	tests := []struct {
		typ, in string
		want    any
		wantErr bool
		out     string // how the server's value is written back without a prior spelling
	}{
		{"string", "metric", "metric", false, "metric"},
		{"number", "1.50", 1.5, false, "1.5"},
		{"number", "abc", nil, true, ""},
		{"integer", "10", 10.0, false, "10"},
		{"integer", "1e3", 1000.0, false, "1000"},
		{"integer", "1.5", nil, true, ""},
		{"integer", "1e16", nil, true, ""},
		{"boolean", "true", true, false, "true"},
		{"boolean", "yes", nil, true, ""},
		{"array", `[1,"a"]`, []any{1.0, "a"}, false, `[1,"a"]`},
		{"array", `{"a":1}`, nil, true, ""},
		{"object", `{"b": 1, "a": [true]}`, map[string]any{"a": []any{true}, "b": 1.0}, false, `{"a":[true],"b":1}`},
		{"object", `nope`, nil, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.typ+"/"+tt.in, func(t *testing.T) {
			got, err := parseParamValue(tt.typ, tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseParamValue(%q, %q) = %v, want an error", tt.typ, tt.in, got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parseParamValue(%q, %q) = %#v, %v; want %#v", tt.typ, tt.in, got, err, tt.want)
			}
			if s := formatParamValue(tt.typ, got, types.StringNull()).ValueString(); s != tt.out {
				t.Errorf("formatParamValue = %q, want %q", s, tt.out)
			}
			// The prior spelling survives when it means the same value.
			if s := formatParamValue(tt.typ, got, types.StringValue(tt.in)).ValueString(); s != tt.in {
				t.Errorf("formatParamValue with prior = %q, want %q", s, tt.in)
			}
		})
	}
}
