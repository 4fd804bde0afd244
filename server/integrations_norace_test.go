//go:build !race

package server_test

// integrationsRace reports a build with the race detector.
const integrationsRace = false
