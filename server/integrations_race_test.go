//go:build race

package server_test

// integrationsRace: a race build has no kernel memory limit for
// transformation workers, so memory bombs are not run.
const integrationsRace = true
