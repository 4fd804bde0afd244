package transform

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// viaJSONParse is what goja's own JSON.parse then JSON.stringify make of s.
func viaJSONParse(vm *goja.Runtime, s string) (string, bool) {
	v, err := vm.RunString("(function (s) { return JSON.stringify(JSON.parse(s)) })")
	if err != nil {
		panic(err)
	}
	fn, _ := goja.AssertFunction(v)
	out, err := fn(goja.Undefined(), vm.ToValue(s))
	if err != nil {
		return "", false
	}
	return out.String(), true
}

func viaJSONToJS(vm *goja.Runtime, s string) (string, bool) {
	v, err := jsonToJS(vm, []byte(s))
	if err != nil {
		return "", false
	}
	str, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("stringify"))
	out, err := str(goja.Undefined(), v)
	if err != nil {
		panic(err)
	}
	return out.String(), true
}

func TestJSONToJS(t *testing.T) {
	docs := []string{
		`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e3`, `-12`, `9007199254740993`, `1e400`,
		`"x"`, `"\u00e9\ud83d\ude00\n\"\\\/"`, ` { "b" : 1 , "a" : [ 1 , { } , [ ] ] } `,
		`{"a":1,"a":2}`, `{"__proto__":{"polluted":true}}`, `[{"constructor":1,"toString":"x"}]`,
		`{"big":123456789012345678901234567890}`, `"caf` + "\u00e9" + `"`,
	}
	vm := goja.New()
	for _, d := range docs {
		t.Run(d, func(t *testing.T) {
			want, ok1 := viaJSONParse(vm, d)
			if !ok1 { // goja's JSON.parse refuses numbers out of float64 range; JavaScript makes them Infinity
				want, ok1 = "null", d == "1e400"
			}
			got, ok2 := viaJSONToJS(vm, d)
			if !ok1 || !ok2 || got != want {
				t.Fatalf("jsonToJS gives %s (%v), JSON.parse gives %s (%v)", got, ok2, want, ok1)
			}
		})
	}
	for _, bad := range []string{``, `{`, `[1,]`, `{"a"}`, `01x`, `"\x01"`, `nul`, `[1] 2`, `{"a":1,}`, strings.Repeat("[", 600) + strings.Repeat("]", 600)} {
		if _, err := jsonToJS(vm, []byte(bad)); err == nil {
			t.Errorf("jsonToJS(%q) accepted invalid or too deep JSON", bad)
		}
	}
}

// FuzzJSONToJS checks that the sandbox's JSON reader agrees with goja's
// JSON.parse on every valid document.
func FuzzJSONToJS(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}],"c":"d"}`, `[true,false,-1.5e-3]`, `"\u2028"`, `{"__proto__":1}`} {
		f.Add(s)
	}
	vm := goja.New()
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) || strings.Count(s, "[")+strings.Count(s, "{") > 400 {
			return
		}
		got, ok := viaJSONToJS(vm, s)
		if !ok {
			t.Fatalf("jsonToJS refused valid JSON %q", s)
		}
		// goja's JSON.parse refuses numbers out of float64 range (JavaScript
		// makes them Infinity); compare where it accepts.
		if want, ok := viaJSONParse(vm, s); ok && got != want {
			t.Fatalf("jsonToJS(%q) = %q, JSON.parse = %q", s, got, want)
		}
	})
}
