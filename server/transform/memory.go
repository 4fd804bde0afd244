package transform

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// headroom is the memory a worker may use past its budget before the
// kernel refuses (Linux) or the watchdog ends the process: room for the Go
// runtime to fail cleanly, and for the watchdog to act first.
func headroom(budget int64) int64 { return max(budget/2, 32<<20) }

// errMemoryLimit is the value a runtime is interrupted with when its
// script's memory passes the budget.
var errMemoryLimit = errors.New("memory limit exceeded")

// memoryGuard watches the Go heap of a worker while a script runs.
type memoryGuard struct {
	budget int64
	base   int64 // heap bytes in use when idle, at start
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func readHeap() int64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func newMemoryGuard(budget int64) *memoryGuard {
	// The garbage collector works hard before the budget is reached, so
	// that garbage is not mistaken for a script's live memory.
	all := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(all)
	debug.SetMemoryLimit(int64(all[0].Value.Uint64()) + budget*3/4)
	return &memoryGuard{budget: budget, base: readHeap()}
}

// watch samples the heap every millisecond until the returned stop is
// called (a job shorter than that costs one timer, nothing more). Past
// the budget it interrupts vm, which fails the script with its line; if
// memory still grows (a built-in allocating on its own) past the
// headroom, it ends the process as the kernel limit would. stop reports
// whether the budget was exceeded.
func (g *memoryGuard) watch(vm *goja.Runtime) (stop func() bool) {
	var (
		mu      sync.Mutex
		stopped bool
		tripped bool
		t       *time.Timer
	)
	var check func()
	check = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		used := readHeap() - g.base
		if used > g.budget && !tripped {
			// The heap metric counts garbage until a collection frees it
			// (an earlier script's runtime, say): only live memory past
			// the budget stops the script.
			runtime.GC()
			if used = readHeap() - g.base; used > g.budget {
				tripped = true
				vm.Interrupt(errMemoryLimit)
			}
		}
		if used > g.budget+headroom(g.budget) {
			fmt.Fprintf(os.Stderr, "fatal error: out of memory: the script's heap passed %d bytes\n", used)
			os.Exit(2)
		}
		t.Reset(time.Millisecond)
	}
	mu.Lock()
	t = time.AfterFunc(time.Millisecond, check)
	mu.Unlock()
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
		return tripped
	}
}
