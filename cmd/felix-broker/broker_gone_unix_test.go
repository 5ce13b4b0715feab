//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
)

// A client waiting for an ack notices a broker process killed with
// SIGKILL as soon as the broker's host says that nothing listens on its
// port: the publish fails with ErrConnectionRefused, long before any
// silence would. A broker merely stopped (SIGSTOP: its port still bound,
// the datagrams queued) is not taken for dead: on loopback its host cannot
// be lost, so not even SilentPeerTimeout's silence closes the connection,
// and the publish completes once the broker runs again.
func TestClientNoticesKilledBrokerByItsClosedPort(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and kills a broker process")
	}
	kb := newKillableBroker(t)
	kb.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	proc := kb.bp.cmd.Process
	c, err := kb.dial(ctx)
	require.NoError(t, err)
	defer c.Close()
	pub, err := c.NewPublisher(ctx, "default", "orders")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, []byte("before")))
	require.NoError(t, proc.Signal(syscall.SIGSTOP))
	require.Eventually(t, func() bool { return stoppedProcess(proc.Pid) }, 5*time.Second, time.Millisecond,
		"the broker stops (a signal is delivered asynchronously)")
	done := make(chan error, 1)
	go func() { done <- pub.Publish(ctx, []byte("while stopped")) }()
	stoppedFor := 7 * time.Second // past the 5 s SilentPeerTimeout and its probe timeouts
	select {
	case err := <-done:
		t.Fatalf("a publish to a stopped broker ended: %v", err)
	case <-time.After(stoppedFor):
	}
	require.NoError(t, proc.Signal(syscall.SIGCONT))
	require.NoError(t, <-done, "the publish completes once the broker runs again")
	require.NoError(t, c.Conn().Context().Err())
	t.Logf("stopped broker: the connection outlived %v of SIGSTOP", stoppedFor)

	killed, conn, err := publishUntilFailure(t, ctx, kb, func() { kb.kill(t) })
	require.ErrorIs(t, err, client.ErrConnectionRefused)
	require.ErrorContains(t, context.Cause(conn.Context()), "broker gone: port unreachable")
	t.Logf("killed broker: the publish failed %v after SIGKILL (port unreachable)", killed.Round(time.Millisecond))
}

// publishUntilFailure publishes one acked record at a time to kb; once ten
// are acked it calls signal. It returns how long after the signal a
// publish failed, the connection the client had, and the failure.
func publishUntilFailure(t *testing.T, ctx context.Context, kb *killableBroker, signal func()) (time.Duration, *quic.Conn, error) {
	c, err := kb.dial(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	conn := c.Conn()
	pub, err := c.NewPublisher(ctx, "default", "orders")
	require.NoError(t, err)
	var sent time.Time
	for n := 0; ; n++ {
		if n == 10 {
			sent = time.Now()
			signal()
		}
		if err := pub.Publish(ctx, []byte("gone?")); err != nil {
			failed := time.Since(sent)
			require.False(t, sent.IsZero(), "a publish failed before the signal: %v", err)
			select { // the streams may fail before the connection's context ends
			case <-conn.Context().Done():
			case <-ctx.Done():
			}
			require.NoError(t, ctx.Err())
			return failed, conn, err
		}
	}
}

// stoppedProcess reports whether every thread of process pid is stopped
// by a signal (state T in /proc/PID/task/*/stat): a group stop reaches the
// threads one at a time, and one still running can answer a publish; where
// there is no /proc it trusts the signal.
func stoppedProcess(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return true
	}
	for _, stat := range stats {
		raw, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		_, after, ok := strings.Cut(string(raw), ") ")
		if !ok || !strings.HasPrefix(after, "T") {
			return false
		}
	}
	return true
}
