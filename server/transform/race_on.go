//go:build race

package transform

// raceEnabled: the race detector's runtime reserves terabytes of address
// space and maps shadow memory as the heap grows, which a kernel memory
// limit would break; race builds rely on the worker's watchdog alone.
const raceEnabled = true
