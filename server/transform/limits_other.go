//go:build !linux

package transform

import "os"

// memoryLimitEnforced reports whether workers run under a hard memory
// limit set by the kernel: not on this platform, where only the worker's
// own watchdog stands guard. It contains gradual growth; a single huge
// allocation inside a built-in can overshoot before the watchdog sees it.
const memoryLimitEnforced = false

func limitMemory(int64) error { return nil }

func selfExecutable() (string, error) { return os.Executable() }
