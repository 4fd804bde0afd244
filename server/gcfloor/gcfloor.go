// Package gcfloor sets the garbage collector's pace for a server whose live
// heap is small: Go's default (GOGC=100, a 4 MB minimum) collects a
// gateway with 2 MB of live data several times a second under load, and
// requests that meet a collection wait for it (the p99 of the LLM routes
// is mostly that). Run keeps the heap goal at Floor or Percent% above the
// live heap, whichever is larger, by adjusting GOGC as the live heap
// changes (the "GC tuner" of large Go deployments).
package gcfloor

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Defaults.
const (
	// DefaultFloor is the heap goal below which the collector does not run.
	DefaultFloor = 64 << 20
	// DefaultPercent is GOGC when the live heap is large enough that
	// Percent% growth passes the floor (above about 43 MB live): half Go's
	// default, so that a server holding thousands of open streams (tens of
	// MB live, mostly connection buffers) stays within 1.5 times that. The
	// collector then runs twice as often for such a heap; with 2,000 open
	// streams it took 2% of the CPU (bench/stream.sh).
	DefaultPercent = 50
	// maxPercent bounds GOGC for tiny live heaps.
	maxPercent = 10000
	// interval is how often the live heap is read.
	interval = 500 * time.Millisecond
)

// Percent returns the GOGC that puts the heap goal at floor or percent%
// above live, whichever is larger.
func Percent(live, floor uint64, percent int) int {
	if live == 0 {
		return maxPercent
	}
	if live*uint64(100+percent)/100 >= floor {
		return percent
	}
	p := int(floor*100/live) - 100
	return min(max(p, percent), maxPercent)
}

// Run adjusts GOGC until ctx ends, then restores the setting it found.
// floor and percent zero take the defaults.
func Run(ctx context.Context, floor uint64, percent int) {
	if floor == 0 {
		floor = DefaultFloor
	}
	if percent <= 0 {
		percent = DefaultPercent
	}
	orig := apply(floor, percent)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			debug.SetGCPercent(orig)
			return
		case <-t.C:
			apply(floor, percent)
		}
	}
}

// apply sets GOGC for the live heap now and returns the previous setting.
func apply(floor uint64, percent int) int {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	return debug.SetGCPercent(Percent(sample[0].Value.Uint64(), floor, percent))
}
