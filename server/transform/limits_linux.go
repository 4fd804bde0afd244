//go:build linux

package transform

import (
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
)

// memoryLimitEnforced reports whether workers run under a hard memory
// limit set by the kernel.
const memoryLimitEnforced = true

// limitMemory caps the worker's writable private memory (RLIMIT_DATA:
// the Go heap, goroutine stacks, every anonymous mapping) at what it uses
// now plus budget. An allocation past the cap fails in the kernel; the Go
// runtime then exits with "out of memory", which the parent reports as the
// script's failure. A soft Go memory limit below the cap makes the garbage
// collector work hard before that happens. Core dumps and file writes are
// disabled too: a worker has no business producing either.
func limitMemory(budget int64) error {
	base, err := vmData()
	if err != nil {
		return err
	}
	limit := uint64(base + budget)
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_DATA): %w", err)
	}
	zero := &syscall.Rlimit{}
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, zero)
	_ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, zero)
	debug.SetMemoryLimit(base + budget*3/4)
	return nil
}

// vmData reads the process's current data size from /proc/self/status.
func vmData() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmData:")); ok {
			f := bytes.Fields(v)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmData in /proc/self/status")
}

// selfExecutable is what a worker is started from: the running binary
// itself, even if its file has since been replaced or deleted.
func selfExecutable() (string, error) { return "/proc/self/exe", nil }
