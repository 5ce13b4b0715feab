package testutil

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// RunWithLeakCheck runs the tests of a package and fails the run if they
// leave a goroutine or a socket/epoll/event descriptor behind. Use it as
// `func TestMain(m *testing.M) { os.Exit(testutil.RunWithLeakCheck(m)) }`.
func RunWithLeakCheck(m *testing.M) int {
	// Initialise the runtime's netpoller (its epoll fd and eventfd live for
	// the process) before taking the baseline.
	if pc, err := net.ListenPacket("udp", "127.0.0.1:0"); err == nil {
		pc.Close()
	}
	g0, fd0 := Goroutines(), openFDs()
	code := m.Run()
	if code == 0 {
		if err := settle(g0, fd0); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	return code
}

// settle waits (by polling: there is no event for "a goroutine has exited")
// for the goroutine and fd counts to return to their starting values.
func settle(g0, fd0 int) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for {
		g, fd := Goroutines(), openFDs()
		if g <= g0 && fd <= fd0 {
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline:
			buf := make([]byte, 1<<20)
			return fmt.Errorf("goroutines %d (start %d), fds %d (start %d)\n%s",
				g, g0, fd, fd0, buf[:runtime.Stack(buf, true)])
		}
	}
}

// openFDs counts this process's open sockets, epoll and event descriptors
// (Linux: /proc/self/fd; elsewhere the check is skipped by returning 0).
// Plain files are left out: the testing package itself opens some lazily.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && (strings.HasPrefix(target, "socket:") || strings.HasPrefix(target, "anon_inode:")) {
			n++
		}
	}
	return n
}
