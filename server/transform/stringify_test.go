package transform

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// buildNest makes a value of vm from ops, one byte each: '[' opens an
// array, '{' opens an object, ']' closes the innermost open container, any
// other byte adds a number to it. The root is an array. It returns the
// value and how deeply it nests (the root counts as one level).
func buildNest(vm *goja.Runtime, ops []byte) (goja.Value, int) {
	root := vm.NewArray()
	stack := []*goja.Object{root}
	sizes := []int{0}
	depth := 1
	add := func(v goja.Value) {
		top, n := len(stack)-1, sizes[len(sizes)-1]
		key := strconv.Itoa(n)
		if stack[top].ClassName() != "Array" {
			key = "k" + key
		}
		_ = stack[top].Set(key, v)
		sizes[top]++
	}
	for _, b := range ops {
		switch b {
		case '[', '{':
			o := vm.NewObject()
			if b == '[' {
				o = vm.NewArray()
			}
			add(o)
			stack, sizes = append(stack, o), append(sizes, 0)
			depth = max(depth, len(stack))
		case ']':
			if len(stack) > 1 {
				stack, sizes = stack[:len(stack)-1], sizes[:len(sizes)-1]
			}
		default:
			add(vm.ToValue(int(b)))
		}
	}
	return root, depth
}

// FuzzStringifyResult checks the result serialiser against the runtime's
// plain JSON.stringify: the same text for every value within
// MaxResultDepth, errTooDeep exactly for the values nested deeper, and
// always JSON that Go's encoder accepts.
func FuzzStringifyResult(f *testing.F) {
	f.Add([]byte("[1{2]3]4"))
	f.Add([]byte(strings.Repeat("[", MaxResultDepth-1) + "x"))
	f.Add([]byte(strings.Repeat("{", MaxResultDepth)))
	f.Add([]byte(strings.Repeat("[]", 3000)))
	f.Fuzz(func(t *testing.T, ops []byte) {
		vm := goja.New()
		stringify := intrinsicStringify(vm)
		v, depth := buildNest(vm, ops)
		got, err := stringifyResult(vm, stringify, v)
		if depth > MaxResultDepth {
			if !errors.Is(err, errTooDeep) {
				t.Fatalf("a value %d levels deep gave %v, want errTooDeep", depth, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("a value %d levels deep: %v", depth, err)
		}
		want, err := stringify(goja.Undefined(), v)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("got %s, want %s", got, want)
		}
		var out any
		if err := json.Unmarshal([]byte(got.String()), &out); err != nil {
			t.Fatalf("not JSON Go can read: %v", err)
		}
	})
}
