//go:build race

package filter

// raceEnabled is set under the race detector, which makes sync.Pool (ours,
// and regexp's) drop items at random, so allocation counts mean nothing.
const raceEnabled = true
