//go:build race

package main

// raceEnabled: the race detector slows the one synchronous writer of the
// watch scenario more than the watchers, so load-dependent drops may not
// happen.
const raceEnabled = true
