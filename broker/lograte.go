package broker

import (
	"fmt"
	"sync"
	"time"
)

// logLimit bounds how many lines a peer-triggered event may log: burst
// lines at once, then one per every. What an unauthenticated peer can make
// the broker write must not grow with what it sends (a refused auth per
// frame, on thousands of streams), yet the first refusals of a burst are
// the ones an operator needs, so they pass and the rest are counted.
type logLimit struct {
	every time.Duration
	burst int

	mu struct {
		sync.Mutex
		tokens     int
		last       time.Time
		suppressed int
	}
}

func newLogLimit(every time.Duration, burst int) *logLimit {
	l := &logLimit{every: every, burst: burst}
	l.mu.tokens = burst
	return l
}

// allow reports whether a line may be logged now and, if so, how many were
// suppressed since the last one that was.
func (l *logLimit) allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := int(now.Sub(l.mu.last) / l.every); n > 0 {
		l.mu.tokens = min(l.burst, l.mu.tokens+n)
		l.mu.last = now
	}
	if l.mu.tokens == 0 {
		l.mu.suppressed++
		return false, 0
	}
	l.mu.tokens--
	suppressed, l.mu.suppressed = l.mu.suppressed, 0
	return true, suppressed
}

// maxEchoBytes caps a client-chosen string (a claimed tenant, a name in a
// refused request) quoted in a log line or an error: enough to recognise
// it, never the 15 MiB a frame may carry.
const maxEchoBytes = 128

// maxErrorEchoBytes caps an error message logged for a peer's request:
// room for the cause, not for what the peer put in it.
const maxErrorEchoBytes = 512

// clip is s cut to maxEchoBytes, saying how long it was.
func clip(s string) string { return clipTo(s, maxEchoBytes) }

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:n], len(s))
}
