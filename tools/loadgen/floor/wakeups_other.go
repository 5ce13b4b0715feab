//go:build !linux

package floor

// wakeups is not counted outside Linux.
func wakeups() uint64 { return 0 }
