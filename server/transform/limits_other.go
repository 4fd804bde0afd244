//go:build !linux

package transform

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// memoryLimitEnforced reports whether workers run under a hard memory
// limit set by the kernel: not on this platform, where a watchdog stands in.
const memoryLimitEnforced = false

// limitMemory has no kernel limit to lean on outside Linux: a soft Go
// memory limit plus a watchdog that ends the worker when the memory the
// Go runtime holds grows past budget. It contains gradual growth; a single
// huge allocation can overshoot before the watchdog sees it.
func limitMemory(budget int64) error {
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(sample)
	base := int64(sample[0].Value.Uint64())
	debug.SetMemoryLimit(base + budget*3/4)
	go func() {
		for range time.Tick(2 * time.Millisecond) {
			metrics.Read(sample)
			if int64(sample[0].Value.Uint64())-base > budget {
				fmt.Fprintln(os.Stderr, "fatal error: out of memory (transform watchdog)")
				os.Exit(2)
			}
		}
	}()
	return nil
}

func selfExecutable() (string, error) { return os.Executable() }
