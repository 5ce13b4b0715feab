//go:build unix

package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
)

// A client waiting for an ack notices a broker process killed with
// SIGKILL as soon as the broker's host says that nothing listens on its
// port: the publish fails with ErrConnectionRefused, long before the 2 s
// of silence that close the connection to a lost host. A broker merely
// stopped (SIGSTOP: its port still bound, the datagrams queued) is not
// taken for dead by that check; only its silence closes the connection.
func TestClientNoticesKilledBrokerByItsClosedPort(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and kills a broker process")
	}
	kb := newKillableBroker(t)
	kb.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	proc := kb.bp.cmd.Process
	stopped, conn, err := publishUntilFailure(t, ctx, kb, func() { require.NoError(t, proc.Signal(syscall.SIGSTOP)) })
	require.NotErrorIs(t, err, client.ErrConnectionRefused, "a stopped broker's port is open")
	require.ErrorContains(t, context.Cause(conn.Context()), "broker silent", "publish error: %v", err)
	t.Logf("stopped broker: the connection closed %v after SIGSTOP (silence)", stopped.Round(time.Millisecond))
	require.NoError(t, proc.Signal(syscall.SIGCONT))

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
