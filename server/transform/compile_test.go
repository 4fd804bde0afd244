package transform_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dop251/goja"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/transform"
)

func TestCompileRunsAsFunctionBody(t *testing.T) {
	p, err := transform.Compile("weather.forecast", "const t = data.temp;\nreturn {celsius: t, status: response.status};")
	if err != nil {
		t.Fatal(err)
	}
	rt := goja.New()
	v, err := rt.RunProgram(p)
	if err != nil {
		t.Fatal(err)
	}
	fn, ok := goja.AssertFunction(v)
	if !ok {
		t.Fatalf("program evaluates to %v, want a function", v)
	}
	out, err := fn(goja.Undefined(), rt.ToValue(map[string]any{"temp": 21}), rt.ToValue(map[string]any{"status": 200}))
	if err != nil {
		t.Fatal(err)
	}
	got := out.Export().(map[string]any)
	if got["celsius"] != int64(21) || got["status"] != int64(200) {
		t.Errorf("result = %v", got)
	}
}

func TestCompileStrictMode(t *testing.T) {
	p, err := transform.Compile("x", "leaked = 1; return leaked")
	if err != nil {
		t.Fatal(err)
	}
	rt := goja.New()
	v, err := rt.RunProgram(p)
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := goja.AssertFunction(v)
	if _, err := fn(goja.Undefined()); err == nil || !strings.Contains(err.Error(), "leaked") {
		t.Fatalf("assigning an undeclared variable: err = %v, want a ReferenceError", err)
	}
	if g := rt.GlobalObject().Get("leaked"); g != nil && !goja.IsUndefined(g) {
		t.Errorf("the script leaked a global: %v", g)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, script   string
		line, column   int
		messageContain string
	}{
		{"syntax error on line 1", "return data.;", 1, 13, "Unexpected token"},
		{"syntax error on line 3", "const a = 1;\nconst b = 2;\nreturn a +* b;", 3, 11, "Unexpected token"},
		{"column counts characters", "const s = 'ééé'; return s +* 1;", 1, 28, "Unexpected token"},
		{"unclosed block reported at the end", "if (data) {\n  return 1;", 2, 12, "Unexpected token"},
		{"unterminated string", "return 'abc", 1, 8, ""},
		{"strict mode: with", "with (data) { return x }", 1, 1, ""},
		{"duplicate let", "let a = 1;\nlet a = 2;\nreturn a", 2, 5, "already been declared"},
		{"breaking out of the wrapper", "return 1;\n}); globalThis.x = 1; (function() {", 2, 1, "closes the function body early"},
		{"breaking out with a sequence", "}, function() {", 1, 1, "closes the function body early"},
		{"breaking out with a call", "})(), (function() {", 1, 1, "closes the function body early"},
		{"invalid UTF-8", "return 1;\nreturn '\xff'", 2, 9, "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := transform.Compile("t", tc.script)
			var ce *transform.CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want *CompileError", err, err)
			}
			if ce.Line != tc.line || ce.Column != tc.column {
				t.Errorf("position = line %d, column %d, want line %d, column %d (%s)", ce.Line, ce.Column, tc.line, tc.column, ce.Message)
			}
			if !strings.Contains(ce.Message, tc.messageContain) {
				t.Errorf("message = %q, want it to contain %q", ce.Message, tc.messageContain)
			}
			if strings.Contains(err.Error(), "function(data, response)") {
				t.Errorf("error %q mentions the wrapper", err)
			}
		})
	}
}

func TestCompileRefusesNothingValid(t *testing.T) {
	for _, script := range []string{
		"",
		"return data",
		"// only a comment",
		"return data.items.map(i => ({id: i.id})) // trailing comment",
		"function helper(x) { return x * 2 }\nreturn helper(data.n)",
		"/* block\ncomment */ return 1",
		"return `template ${data.x}`",
		"return 1 // a line comment cannot swallow the wrapper's end",
	} {
		if _, err := transform.Compile("t", script); err != nil {
			t.Errorf("Compile(%q) = %v", script, err)
		}
	}
}
