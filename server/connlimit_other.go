//go:build !unix

package server

// openFileLimit is unknown here; maxConnections uses its default.
func openFileLimit() (uint64, bool) { return 0, false }
