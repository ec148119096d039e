//go:build race

package proxy

// raceEnabled is set under the race detector, whose instrumentation
// allocates: allocation counts mean nothing then.
const raceEnabled = true
