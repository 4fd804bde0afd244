//go:build !race

package transform

// raceEnabled reports a build with the race detector (see race_on.go).
const raceEnabled = false
