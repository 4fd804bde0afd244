package transform

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// A worker is this same executable started again with workerArg as its
// first argument and workerEnv set: the package's init function notices
// and runs the worker loop instead of the program's main (or a test
// binary's tests), then exits. Any binary that links this package — the
// switchboard binary, test binaries — can therefore serve as its own
// sandbox worker without a separate executable.
const (
	workerArg    = "__switchboard-transform-worker"
	workerEnv    = "SWITCHBOARD_TRANSFORM_WORKER"
	workerMemEnv = "SWITCHBOARD_TRANSFORM_WORKER_MEMORY"
)

// Worker exit codes.
const (
	exitProtocol = 3 // the parent sent something unreadable
	exitLimits   = 4 // the memory limit could not be applied
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == workerArg && os.Getenv(workerEnv) == "1" {
		os.Exit(workerMain(os.Stdin, os.Stdout))
	}
}

// workerMain serves jobs from r, writing outcomes to w, until r ends.
func workerMain(r io.Reader, w io.Writer) int {
	// The server decides when a worker ends (end of input, or a kill): a
	// Ctrl-C sent to the whole process group must not cut in-flight
	// scripts short while the server drains its requests.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	runtime.GOMAXPROCS(1)
	debug.SetMaxStack(64 << 20)
	mem, _ := strconv.ParseInt(os.Getenv(workerMemEnv), 10, 64)
	if mem <= 0 {
		mem = DefaultMaxMemoryBytes
	}
	if err := limitMemory(mem); err != nil {
		fmt.Fprintf(os.Stderr, "transform worker: %v\n", err)
		return exitLimits
	}
	in := &frameReader{r: bufio.NewReader(r)}
	out := &frameWriter{w: bufio.NewWriter(w)}
	wk := &runner{programs: map[string]*goja.Program{}}
	wk.memory = newMemoryGuard(mem)
	for {
		var j job
		if err := readJob(in, &j); err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintf(os.Stderr, "transform worker: reading a job: %v\n", err)
			return exitProtocol
		}
		o := wk.run(&j)
		if err := writeOutcome(out, &o); err != nil {
			return exitProtocol
		}
	}
}

// maxCachedPrograms bounds a worker's compiled-program cache.
const maxCachedPrograms = 512

// runner runs jobs, one at a time, each on a fresh runtime.
type runner struct {
	programs map[string]*goja.Program
	memory   *memoryGuard
}

// newRuntime makes the runtime of one job. Runtimes are used for one job
// only, so that nothing a script leaves behind (globals, modified
// built-ins) is seen by another call. A new goja runtime costs about a
// microsecond: its built-ins materialise on first use.
func newRuntime() *goja.Runtime {
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallDepth)
	return vm
}

// maxCallDepth bounds the JavaScript call stack.
const maxCallDepth = 4096

// programKey is the cache key of a script.
func programKey(name, script string) string {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(script))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func (wk *runner) program(j *job) (*goja.Program, *outcome) {
	if p, ok := wk.programs[j.Key]; ok {
		return p, nil
	}
	p, err := Compile(j.Name, j.Script)
	if err != nil {
		var ce *CompileError
		if errors.As(err, &ce) {
			return nil, &outcome{Kind: outcomeCompile, Message: ce.Message, Line: ce.Line, Column: ce.Column}
		}
		return nil, &outcome{Kind: outcomeCompile, Message: err.Error()}
	}
	if len(wk.programs) >= maxCachedPrograms {
		for k := range wk.programs { // evict an arbitrary entry
			delete(wk.programs, k)
			break
		}
	}
	wk.programs[j.Key] = p
	return p, nil
}

// errTimedOut is the value a timed-out runtime is interrupted with.
var errTimedOut = errors.New("time limit exceeded")

func (wk *runner) run(j *job) (out outcome) {
	vm := newRuntime()
	defer func() {
		if p := recover(); p != nil {
			out = outcome{Kind: outcomeCrash, Message: fmt.Sprintf("the sandbox failed: %v", p)}
		}
	}()
	// The result is serialised with this runtime's own JSON.stringify,
	// taken before the script runs: a script may replace the global (or
	// the whole JSON object) with anything, and its result must still
	// come out as JSON text, or as a transformation failure.
	stringify := intrinsicStringify(vm)
	prog, bad := wk.program(j)
	if bad != nil {
		return *bad
	}
	if wk.memory != nil {
		stop := wk.memory.watch(vm)
		defer func() {
			if stop() && out.Kind != outcomeMemory {
				out = outcome{Kind: outcomeMemory, Message: "the transformation exceeded its memory limit", Line: out.Line, Column: out.Column}
			}
		}()
	}

	// Hand the response over as native values. This is the server's work,
	// bounded by the response size cap, and not counted against the
	// script's time limit.
	var data goja.Value = goja.Null()
	switch {
	case j.DataJSON:
		v, err := jsonToJS(vm, j.Data)
		if err != nil {
			return outcome{Kind: outcomeData, Message: "the upstream response is not valid JSON: " + err.Error()}
		}
		data = v
	case len(j.Data) > 0:
		data = vm.ToValue(string(j.Data))
	}
	resp := vm.NewObject()
	_ = resp.Set("status", j.Status)
	headers := vm.NewObject()
	for k, v := range j.Headers {
		_ = headers.Set(k, v)
	}
	_ = resp.Set("headers", headers)

	timer := time.AfterFunc(time.Duration(j.TimeoutNanos), func() { vm.Interrupt(errTimedOut) })
	defer timer.Stop()

	fv, err := vm.RunProgram(prog)
	if err != nil {
		return failure(vm, j, err)
	}
	fn, ok := goja.AssertFunction(fv)
	if !ok {
		return outcome{Kind: outcomeCrash, Message: "the compiled transformation is not a function"}
	}
	res, err := fn(goja.Undefined(), data, resp)
	if err != nil {
		return failure(vm, j, err)
	}
	if res == nil || goja.IsUndefined(res) {
		return outcome{Output: []byte("null")}
	}
	sv, err := stringifyResult(vm, stringify, res)
	if errors.Is(err, errTooDeep) {
		return outcome{Kind: outcomeDepth, Message: fmt.Sprintf("the result nests deeper than %d levels", MaxResultDepth)}
	}
	if err != nil {
		return failure(vm, j, err)
	}
	if goja.IsUndefined(sv) { // a function or a symbol: no JSON form
		return outcome{Output: []byte("null")}
	}
	s := sv.String()
	if int64(len(s)) > j.MaxOutput {
		return outcome{Kind: outcomeOutput, Message: fmt.Sprintf("the result is %d bytes as JSON, over the limit of %d bytes", len(s), j.MaxOutput)}
	}
	return outcome{Output: []byte(s)}
}

// MaxResultDepth bounds how deeply a transformation's result may nest
// (arrays and objects within each other; a flat object is one level).
// Deeper results fail the call with transformation_failed. Without a
// bound, a result nested tens of thousands of levels deep costs the
// serialiser time quadratic in its depth and cannot be encoded into the
// response (Go's encoding/json stops at 10,000 levels), and no real API
// response needs a thousand.
const MaxResultDepth = 1000

// errTooDeep stops the serialisation of a result past MaxResultDepth.
var errTooDeep = errors.New("result nests too deeply")

// intrinsicStringify returns vm's own JSON.stringify. Call it before any
// script runs in vm.
func intrinsicStringify(vm *goja.Runtime) goja.Callable {
	f, ok := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("stringify"))
	if !ok {
		panic("transform: the runtime has no JSON.stringify")
	}
	return f
}

// stringifyResult serialises res with stringify (the intrinsic), refusing
// results that nest deeper than MaxResultDepth with errTooDeep as soon as
// the serialiser reaches that depth. Depth is followed with a replacer
// that sees each value after its toJSON, together with its holder: the
// objects on the path from the root to the value being serialised form a
// stack, and a holder is always on it (serialisation is depth-first).
// The replacer returns every value unchanged.
func stringifyResult(vm *goja.Runtime, stringify goja.Callable, res goja.Value) (goja.Value, error) {
	var (
		path    []*goja.Object
		tooDeep bool
	)
	replacer := vm.ToValue(func(call goja.FunctionCall) goja.Value {
		v := call.Argument(1)
		holder, _ := call.This.(*goja.Object)
		for len(path) > 0 && !path[len(path)-1].SameAs(holder) {
			path = path[:len(path)-1]
		}
		if o, ok := v.(*goja.Object); ok && nests(o) {
			if len(path) >= MaxResultDepth {
				tooDeep = true
				panic(vm.NewGoError(errTooDeep))
			}
			path = append(path, o)
		}
		return v
	})
	sv, err := stringify(goja.Undefined(), res, replacer)
	if tooDeep {
		return nil, errTooDeep
	}
	return sv, err
}

// nests tells whether JSON.stringify serialises o as an array or an
// object (rather than as a primitive, or not at all).
func nests(o *goja.Object) bool {
	if _, callable := goja.AssertFunction(o); callable {
		return false
	}
	switch o.ClassName() {
	case "Number", "String", "Boolean", "BigInt", "Symbol":
		return false
	}
	return true
}

// maxMessage bounds an error message taken from a script.
const maxMessage = 512

// failure describes a script error: its message and where it happened.
func failure(vm *goja.Runtime, j *job, err error) outcome {
	var (
		intr  *goja.InterruptedError
		stack *goja.StackOverflowError
		ex    *goja.Exception
	)
	switch {
	case errors.As(err, &intr) && errors.Is(err, errMemoryLimit):
		out := outcome{Kind: outcomeMemory, Message: "the transformation exceeded its memory limit"}
		out.Line, out.Column = position(j.Name, intr.Stack())
		return out
	case errors.As(err, &intr):
		out := outcome{Kind: outcomeTimeout, Message: "the transformation exceeded its time limit"}
		out.Line, out.Column = position(j.Name, intr.Stack())
		return out
	case errors.As(err, &stack):
		out := outcome{Kind: outcomeStack, Message: "RangeError: maximum call stack size exceeded"}
		out.Line, out.Column = position(j.Name, stack.Stack())
		return out
	case errors.As(err, &ex):
		out := outcome{Kind: outcomeThrow, Message: describe(vm, ex.Value())}
		out.Line, out.Column = position(j.Name, ex.Stack())
		if out.Message == "" {
			out.Message = "the transformation threw an exception"
		}
		return out
	}
	return outcome{Kind: outcomeCrash, Message: err.Error()}
}

// describe renders a thrown value as String(value) does, through the
// runtime (whose interrupt timer is still armed, so a hostile toString
// cannot hang the worker), falling back to a fixed text.
func describe(vm *goja.Runtime, v goja.Value) string {
	if v == nil {
		return ""
	}
	str, ok := goja.AssertFunction(vm.Get("String"))
	if !ok {
		return ""
	}
	s, err := str(goja.Undefined(), v)
	if err != nil {
		var intr *goja.InterruptedError
		if errors.As(err, &intr) {
			return "the transformation exceeded its time limit while its exception was being described"
		}
		return "the transformation threw a value that cannot be described"
	}
	msg := strings.ToValidUTF8(s.String(), "\uFFFD")
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// position finds the innermost stack frame in the user's script and maps
// it to the script's own lines.
func position(name string, frames []goja.StackFrame) (int, int) {
	for i := range frames {
		f := &frames[i]
		if f.SrcName() != name {
			continue
		}
		p := f.Position()
		if p.Line == 0 {
			continue
		}
		line := max(p.Line-LineOffset, 1)
		return line, max(p.Column, 1)
	}
	return 0, 0
}
