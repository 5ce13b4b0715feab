// Package testutil holds helpers shared by tests: goroutine leak checks and
// polling for conditions that have no event to wait on.
package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Goroutines returns the number of goroutines, ignoring ones that belong to
// the test framework itself.
func Goroutines() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	count := 0
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "testing.(*T).Run") || strings.Contains(g, "testing.tRunner.func") ||
			strings.Contains(g, "testing.runTests") || strings.Contains(g, "signal.signal_recv") {
			continue
		}
		count++
	}
	return count
}

// Eventually polls cond every few milliseconds until it holds or d passes.
// Use it only where the system offers no event to wait on (counters in
// another process, a connection's teardown inside quic-go).
func Eventually(t testing.TB, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %s", d, fmt.Sprintf(format, args...))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// GoroutinesSettle waits until the goroutine count is at most want.
func GoroutinesSettle(t testing.TB, want int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		n := Goroutines()
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutines: %d, want at most %d\n%s", n, want, buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
