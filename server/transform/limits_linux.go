//go:build linux

package transform

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// memoryLimitEnforced reports whether workers run under a hard memory
// limit set by the kernel.
const memoryLimitEnforced = true

// limitMemory caps the worker's writable private memory (RLIMIT_DATA:
// the Go heap, goroutine stacks, every anonymous mapping) at what it uses
// now plus budget plus headroom. The worker's watchdog stops a script at
// budget; the kernel limit is the hard stop for what the watchdog cannot
// see coming, such as one huge allocation inside a built-in: the kernel
// refuses it, the Go runtime exits with "out of memory", and the parent
// reports the script's failure. Core dumps and file writes are disabled
// too: a worker has no business producing either.
//
// The address-space limit (RLIMIT_AS) sits well above that: it does not
// bound memory use (RLIMIT_DATA does), but makes an absurd single
// allocation (`'x'.repeat(1e9)`) fail when the Go runtime reserves address
// space for it, before anything is mapped, so that the runtime exits with
// a clean "out of memory" instead of tripping over a failed mapping.
func limitMemory(budget int64) error {
	if raceEnabled {
		return nil
	}
	data, err := procStatus("VmData")
	if err != nil {
		return err
	}
	size, err := procStatus("VmSize")
	if err != nil {
		return err
	}
	limit := uint64(data + budget + headroom(budget))
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_DATA): %w", err)
	}
	as := uint64(size + 2*(budget+headroom(budget)) + 256<<20)
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as}); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_AS): %w", err)
	}
	zero := &syscall.Rlimit{}
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, zero)
	_ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, zero)
	return nil
}

// procStatus reads a size field (in bytes) from /proc/self/status.
func procStatus(field string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
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
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// selfExecutable is what a worker is started from: the running binary
// itself, even if its file has since been replaced or deleted.
func selfExecutable() (string, error) { return "/proc/self/exe", nil }
