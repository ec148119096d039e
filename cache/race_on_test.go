//go:build race

package cache

// raceEnabled is set under the race detector, whose instrumentation
// allocates: allocation counts mean nothing then.
const raceEnabled = true
