package transform_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/transform"
)

func newSandbox(t *testing.T, o transform.Options) *transform.Sandbox {
	t.Helper()
	s, err := transform.NewSandbox(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func jsonIn(script, data string) transform.Input {
	return transform.Input{Name: "test.action", Script: script, Data: []byte(data), DataJSON: true, Status: 200,
		Headers: map[string]string{"content-type": "application/json", "x-rate-remaining": "41"}}
}

func TestSandboxResults(t *testing.T) {
	s := newSandbox(t, transform.Options{Workers: 1})
	tests := []struct {
		name string
		in   transform.Input
		want string
	}{
		{"pick fields", jsonIn("return {temp: data.main.temp, city: data.name}", `{"name":"Oslo","main":{"temp":-3.5}}`), `{"temp":-3.5,"city":"Oslo"}`},
		{"member order kept", jsonIn("return data", `{"z":1,"a":2,"m":{"y":true,"b":null}}`), `{"z":1,"a":2,"m":{"y":true,"b":null}}`},
		{"__proto__ member is data", jsonIn("return [Object.getPrototypeOf(data) === Object.prototype, data.__proto__.x]", `{"__proto__":{"x":7}}`), `[true,7]`},
		{"arrays and map", jsonIn("return data.list.map(function (x) { return x.id * 2 })", `{"list":[{"id":1},{"id":2},{"id":3}]}`), `[2,4,6]`},
		{"unicode and escapes", jsonIn("return data.s + '!' ", `{"s":"caf\u00e9 \ud83d\ude00 \"q\""}`), `"café 😀 \"q\"!"`},
		{"big and small numbers", jsonIn("return [data.a, data.b, data.c, data.d]", `{"a":9007199254740993,"b":1e300,"c":-0.5,"d":-0}`), `[9007199254740992,1e+300,-0.5,0]`},
		{"response status and headers", jsonIn("return [response.status, response.headers['x-rate-remaining']]", `{}`), `[200,"41"]`},
		{"text body", transform.Input{Name: "t", Script: "return data.toUpperCase()", Data: []byte("plain text"), Status: 200}, `"PLAIN TEXT"`},
		{"empty body is null", transform.Input{Name: "t", Script: "return data === null", Status: 204}, `true`},
		{"undefined result is null", jsonIn("return", `{}`), `null`},
		{"function result is null", jsonIn("return function () {}", `{}`), `null`},
		{"toJSON honoured", jsonIn("return {toJSON: function () { return 'x' }}", `{}`), `"x"`},
		{"a replaced JSON.stringify is not used for the result", jsonIn("JSON.stringify = function () { return {} }; return {a: 1}", `{}`), `{"a":1}`},
		{"a throwing JSON.stringify is not used for the result", jsonIn("JSON.stringify = () => { throw 1 }; return [1]", `{}`), `[1]`},
		{"a replaced JSON object is not used for the result", jsonIn("globalThis.JSON = {stringify: () => '{'}; return {a: [1]}", `{}`), `{"a":[1]}`},
		{"result nested to the depth limit", jsonIn("let o = 1; for (let i = 0; i < 1000; i++) o = i % 2 ? [o] : {o}; return o", `{}`), nested(1000)},
		{"primitive wrappers do not nest", jsonIn("let o = [new Number(1), new String('s'), new Boolean(true)]; for (let i = 1; i < 1000; i++) o = [o]; return o", `{}`),
			strings.Repeat("[", 1000) + `1,"s",true` + strings.Repeat("]", 1000)},
		{"siblings do not add depth", jsonIn("const deep = n => n ? [deep(n - 1)] : 0; return [deep(999), deep(999), {a: deep(999)}].length", `{}`), `3`},
		{"modern syntax", jsonIn("const {a, ...rest} = data; return {...rest, sum: [a, 2].reduce((x, y) => x + y, 0), m: new Map([[1, 2]]).size}", `{"a":1,"b":2}`), `{"b":2,"sum":3,"m":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := s.Run(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Fatalf("got %s, want %s", out, tt.want)
			}
		})
	}
}

// TestSandboxHasNoHostAccess checks that a script sees only the ECMAScript
// built-ins: no module loader, no I/O, no timers, no process.
func TestSandboxHasNoHostAccess(t *testing.T) {
	s := newSandbox(t, transform.Options{Workers: 1})
	names := []string{"require", "module", "exports", "process", "setTimeout", "setInterval", "setImmediate",
		"queueMicrotask", "fetch", "XMLHttpRequest", "WebSocket", "console", "Deno", "Bun", "os", "fs", "load", "print"}
	script := "return [" + strings.Join(func() []string {
		var out []string
		for _, n := range names {
			out = append(out, "typeof "+n)
		}
		return out
	}(), ", ") + "]"
	out, err := s.Run(context.Background(), jsonIn(script, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	if err := json.Unmarshal(out, &types); err != nil {
		t.Fatal(err)
	}
	for i, ty := range types {
		if ty != "undefined" {
			t.Errorf("typeof %s = %s, want undefined", names[i], ty)
		}
	}
}

// TestSandboxIsolatesCalls checks that nothing one call leaves behind
// (globals, modified built-ins) reaches the next, even on the same worker.
func TestSandboxIsolatesCalls(t *testing.T) {
	s := newSandbox(t, transform.Options{Workers: 1})
	ctx := context.Background()
	if _, err := s.Run(ctx, jsonIn("globalThis.leak = data.secret; Object.prototype.polluted = 1; Array.prototype.map = null; return 1", `{"secret":"from-connection-a"}`)); err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(ctx, jsonIn("return [typeof leak, ({}).polluted === undefined, typeof [].map]", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `["undefined",true,"function"]` {
		t.Fatalf("state leaked between calls: %s", out)
	}
}

func transformationFailed(t *testing.T, err error, want ...string) *errs.Error {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.TransformationFailed {
		t.Fatalf("err = %v, want transformation_failed", err)
	}
	for _, w := range want {
		if !strings.Contains(e.Message, w) {
			t.Fatalf("message %q does not contain %q", e.Message, w)
		}
	}
	return e
}

func TestSandboxFailures(t *testing.T) {
	// The time limit stops the runaway scripts; it is long enough that the
	// others (building 20000 levels) finish on a loaded CI machine.
	s := newSandbox(t, transform.Options{Workers: 1, Timeout: time.Second, MaxOutputBytes: 1000})
	tests := []struct {
		name      string
		script    string
		want      []string
		line, col int
	}{
		{"throw error", "const x = 1;\nthrow new Error('boom ' + x)", []string{"at line 2", "Error: boom 1"}, 2, 7},
		{"type error", "const a = data.missing;\nreturn a.b", []string{"at line 2", "TypeError"}, 2, 10},
		{"throw string", "throw 'plain'", []string{"plain"}, 1, 1},
		{"throw hostile toString", "throw {toString: function () { while (true) {} }}", []string{"time limit"}, 0, 0},
		{"infinite loop", "let i = 0;\nwhile (true) { i++ }", []string{"exceeded its time limit of 1s", "connectors.transformTimeout", "line 2"}, 2, 0},
		{"infinite loop in callback", "return [1].map(function () { for (;;) {} })", []string{"time limit"}, 1, 0},
		{"runaway recursion", "function f(n) { return f(n + 1) + 1 }\nreturn f(0)", []string{"maximum call stack size exceeded"}, 1, 0},
		{"output too large", "return 'x'.repeat(2000)", []string{"2002 bytes as JSON, over the limit of 1000 bytes", "connectors.transformMaxOutputBytes"}, 0, 0},
		{"result nested past the depth limit", "let o = 1; for (let i = 0; i < 1001; i++) o = [o]; return o", []string{"nests deeper than 1000 levels"}, 0, 0},
		{"result nested 20000 levels", "let o = 1; for (let i = 0; i < 20000; i++) o = {o}; return o", []string{"nests deeper than 1000 levels"}, 0, 0},
		{"deep result made by toJSON", "const deep = n => ({toJSON: () => n ? [deep(n - 1)] : 0}); return deep(5000)", []string{"nests deeper than 1000 levels"}, 0, 0},
		{"deep sibling after a shallow one", "let o = 1; for (let i = 0; i < 1001; i++) o = [o]; return [[[1]], {a: o}]", []string{"nests deeper than 1000 levels"}, 0, 0},
		{"strict mode", "undeclared = 1; return 1", []string{"ReferenceError"}, 1, 0},
		{"syntax error", "return {", []string{"does not compile"}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Run(context.Background(), jsonIn(tt.script, `{}`))
			e := transformationFailed(t, err, tt.want...)
			if tt.line > 0 && e.Details["line"] != tt.line {
				t.Errorf("details.line = %v, want %d (details %v)", e.Details["line"], tt.line, e.Details)
			}
			if tt.col > 0 && e.Details["column"] != tt.col {
				t.Errorf("details.column = %v, want %d", e.Details["column"], tt.col)
			}
		})
	}
	// After all that, the sandbox still works.
	out, err := s.Run(context.Background(), jsonIn("return data.ok", `{"ok":true}`))
	if err != nil || string(out) != "true" {
		t.Fatalf("after failures: %s, %v", out, err)
	}
}

// nested is what a result of objects and arrays alternating,
// depth levels deep around 1, serialises to (innermost an object).
func nested(depth int) string {
	s := "1"
	for i := range depth {
		if i%2 == 1 {
			s = "[" + s + "]"
		} else {
			s = `{"o":` + s + "}"
		}
	}
	return s
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestSandboxMemoryBomb proves the memory containment: scripts that
// allocate without bound fail their own call with transformation_failed,
// the server process's own heap does not grow, and the sandbox keeps
// answering afterwards.
func TestSandboxMemoryBomb(t *testing.T) {
	if !transform.KernelMemoryLimit {
		t.Skip("this build has no kernel memory limit for workers (race detector or not Linux): the bombs would really allocate gigabytes")
	}
	// A generous time limit, so that it is the memory limit that stops them.
	s := newSandbox(t, transform.Options{Workers: 1, Timeout: 20 * time.Second, MaxMemoryBytes: 64 << 20})
	before := heapInUse()
	bombs := []struct{ name, script string }{
		{"one huge string", "return 'x'.repeat(1e9).length"},
		{"one large string", "return 'x'.repeat(3e8).length"},
		{"doubling string", "let s = 'x'; for (;;) { s = s + s; } "},
		{"ever-growing array", "const a = []; for (let i = 0; ; i++) { a.push({i: i, s: 'item ' + i}) }"},
		{"huge array join", "const s = 'y'.repeat(1 << 20); return new Array(2000).fill(s).join('').length"},
		{"typed array", "return new Uint8Array(2e9).length"},
	}
	for _, b := range bombs {
		t.Run(b.name, func(t *testing.T) {
			start := time.Now()
			_, err := s.Run(context.Background(), jsonIn(b.script, `{}`))
			e := transformationFailed(t, err)
			if !strings.Contains(e.Message, "memory limit of 64 MiB") && !strings.Contains(e.Message, "RangeError") {
				t.Fatalf("message %q does not name the memory limit", e.Message)
			}
			t.Logf("%s: %s in %s", b.name, e.Message, time.Since(start).Round(time.Millisecond))
			// The next script on the same worker allocates for a while: the
			// bomb's garbage must not count against it.
			next := "const a = []; for (let i = 0; i < 20000; i++) a.push({i: i}); return a.length + data.n"
			for range 3 {
				out, err := s.Run(context.Background(), jsonIn(next, `{"n":1}`))
				if err != nil || string(out) != "20001" {
					t.Fatalf("sandbox not answering after the bomb: %s, %v", out, err)
				}
			}
		})
	}
	if grown := int64(heapInUse()) - int64(before); grown > 32<<20 {
		t.Fatalf("server heap grew by %d MiB during the bombs", grown>>20)
	}
}

func TestSandboxCancel(t *testing.T) {
	s := newSandbox(t, transform.Options{Workers: 1, Timeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Run(ctx, jsonIn("for (;;) {}", `{}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancel took %s", d)
	}
	out, err := s.Run(context.Background(), jsonIn("return 1", `{}`))
	if err != nil || string(out) != "1" {
		t.Fatalf("after cancel: %s, %v", out, err)
	}
}

func TestSandboxConcurrent(t *testing.T) {
	s := newSandbox(t, transform.Options{Workers: 2})
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				n := g*100 + i
				out, err := s.Run(context.Background(), jsonIn("return data.n * 2", fmt.Sprintf(`{"n":%d}`, n)))
				if err != nil {
					errc <- err
					return
				}
				if string(out) != fmt.Sprint(n*2) {
					errc <- fmt.Errorf("n=%d: got %s", n, out)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if n := s.Workers(); n > 2 {
		t.Fatalf("%d workers running, limit 2", n)
	}
	_ = s.Close()
	if n := s.Workers(); n != 0 {
		t.Fatalf("%d workers still running after Close", n)
	}
}

// TestSandboxLargeResponse checks that an ordinary script over a large
// response fits the default limits.
func TestSandboxLargeResponse(t *testing.T) {
	s := newSandbox(t, transform.Options{Workers: 1, Timeout: 5 * time.Second})
	var b strings.Builder
	b.WriteString(`{"items":[`)
	n := 0
	for ; b.Len() < 2<<20; n++ {
		if n > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"item %d","tags":["a","b"],"price":%d.25}`, n, n, n)
	}
	b.WriteString(`]}`)
	start := time.Now()
	out, err := s.Run(context.Background(), jsonIn("return data.items.filter(function (x) { return x.id % 1000 === 0 }).length", b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint((n + 999) / 1000); string(out) != want {
		t.Fatalf("got %s, want %s", out, want)
	}
	t.Logf("%d items (%d KiB) in %s", n, b.Len()>>10, time.Since(start))
}
