package segment

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
)

// TestMain fails the package when a test leaks file descriptors (an
// unclosed segment or index file, or a mapping's file): it counts
// /proc/self/fd before and after the run on Linux.
func TestMain(m *testing.M) {
	flag.Parse()
	primeRuntimeFDs()
	before := openFDs()
	code := m.Run()
	if code == 0 && before >= 0 && !fuzzing() {
		if after := openFDs(); after > before {
			fmt.Fprintf(os.Stderr, "segment: file descriptor leak: %d open before the tests, %d after\n", before, after)
			code = 1
		}
	}
	os.Exit(code)
}

func openFDs() int {
	if runtime.GOOS != "linux" {
		return -1
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

func fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}

// primeRuntimeFDs lets the runtime open the descriptors it keeps for the
// life of the process (the network poller's epoll and wake-up fds), so
// they are not counted as a leak.
func primeRuntimeFDs() {
	f, err := os.CreateTemp("", "segment-prime")
	if err != nil {
		return
	}
	_ = f.Close()
	_ = os.Remove(f.Name())
}
