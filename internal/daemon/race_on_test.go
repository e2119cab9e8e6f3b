//go:build race

package daemon_test

// raceEnabled: built with -race, whose instrumentation enlarges frames.
const raceEnabled = true
