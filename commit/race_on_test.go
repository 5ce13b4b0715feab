//go:build race

package commit

// raceEnabled: the race detector reorders goroutines enough that
// scheduling-dependent ratios (waiters per sync) say nothing.
const raceEnabled = true
