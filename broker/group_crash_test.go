package broker_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

// copyTree copies the regular files under src to dst: a crash image of a
// running broker's data directory (what a power cut would leave, given
// that every write we rely on was synced before its ack).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a temporary file renamed meanwhile
		}
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, in)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		return err
	})
	require.NoError(t, err)
}

// Consumer-group crash semantics (docs/protocol.md, at-least-once): a broker
// started on a crash image of a running broker's data directory never
// redelivers a record whose ack was answered with queue_ok, and delivers
// every other record.
func TestGroupCrashImageKeepsAnsweredAcks(t *testing.T) {
	dir := t.TempDir()
	h := serveBroker(t, broker.Config{DataDir: dir}, durableSpec("jobs", "on_commit"))
	ctx := ctxT(t, 30*time.Second)
	const n = 100
	publishJobs(t, ctx, h, "jobs", n)
	q, err := h.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{MaxInflight: 20})
	require.NoError(t, err)
	acked := map[uint64]bool{}
	for i := range 50 {
		msg, err := q.Next(ctx)
		require.NoError(t, err)
		if i%5 != 4 { // leave every fifth record unacked
			require.NoError(t, q.Ack(ctx, msg.Ref()))
			acked[msg.Offset] = true
		}
	}
	image := t.TempDir()
	copyTree(t, dir, image) // the broker keeps running: no final write

	h2 := serveBroker(t, broker.Config{DataDir: image})
	q2, err := h2.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{MaxInflight: 64})
	require.NoError(t, err)
	got := map[uint64]bool{}
	for len(got) < n-len(acked) {
		msg, err := q2.Next(ctx)
		require.NoError(t, err)
		require.False(t, acked[msg.Offset], "offset %d was acked (queue_ok) before the crash", msg.Offset)
		got[msg.Offset] = true
		require.NoError(t, q2.AckAsync(msg.Ref()))
	}
	for off := range uint64(n) {
		require.True(t, acked[off] || got[off], "offset %d lost", off)
	}
}
