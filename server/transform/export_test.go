package transform

// KernelMemoryLimit reports whether workers run under a kernel memory
// limit in this build: memory-bomb tests need it (a race build has none).
const KernelMemoryLimit = memoryLimitEnforced && !raceEnabled
