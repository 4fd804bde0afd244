//go:build unix

package server

import "syscall"

// openFileLimit is the process's soft limit on open files (which the Go
// runtime raises to the hard limit at start).
func openFileLimit() (uint64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, false
	}
	return uint64(l.Cur), true
}
