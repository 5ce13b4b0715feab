package broker_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/segment"

	"github.com/felixmq/felix/internal/testutil"
)

// namedRecord is record i's payload: its number in text, then filler, so a
// test finds it in a segment file whatever the record layout.
func namedRecord(i int) []byte {
	return []byte(fmt.Sprintf("record %06d %s", i, strings.Repeat("p", 100)))
}

// flipInFiles flips a byte of the filler of record i's payload, in
// whichever .log file under dir holds it, and returns that file.
func flipInFiles(t *testing.T, dir string, i int) string {
	logs, err := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	require.NoError(t, err)
	for _, p := range logs {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		if at := bytes.Index(raw, namedRecord(i)); at >= 0 {
			raw[at+20] ^= 0x40
			require.NoError(t, os.WriteFile(p, raw, 0o644))
			return p
		}
	}
	t.Fatalf("record %d is in no segment", i)
	return ""
}

// TestCorruptSealedRecordIsLoud: one flipped payload byte in a sealed
// segment, with the default (fast) open. A replay from earliest used to
// stop after 256-384 of the 500 good records before it, with a bare reset
// and the cause logged at DEBUG. Now the subscriber gets every record
// before it and then a StorageError naming the offset it cannot pass; the
// broker logs the file and byte at ERROR and counts it.
func TestCorruptSealedRecordIsLoud(t *testing.T) {
	dir := t.TempDir()
	cfg := broker.Config{DataDir: dir, Storage: segment.Config{SegmentBytes: 64 << 10}}
	h := serveBroker(t, cfg, durableSpec("jobs", "on_commit"))
	ctx := ctxT(t, 30*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "jobs")
	require.NoError(t, err)
	for i := range 1000 {
		pub.PublishAsync([][]byte{namedRecord(i)})
	}
	require.NoError(t, pub.Publish(ctx, namedRecord(1000)))
	require.NoError(t, h.b.Close())
	file := flipInFiles(t, dir, 500)

	var logs testutil.LockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h2 := serveBroker(t, cfg)
	sub, err := h2.dial(t).Subscribe(ctx, "default", "jobs", client.SubscribeOptions{From: client.Earliest()})
	require.NoError(t, err)
	for want := range 500 {
		ev, err := sub.Next(ctx)
		require.NoError(t, err, "record %d, before the damaged one", want)
		require.Equal(t, namedRecord(want), ev.Payload)
	}
	_, err = sub.Next(ctx)
	var se *client.StorageError
	require.ErrorAs(t, err, &se)
	require.EqualValues(t, 500, se.Offset)
	require.ErrorIs(t, err, client.ErrStorage)

	require.Contains(t, logs.String(), "level=ERROR msg=\"storage corruption: a record cannot be read\"")
	require.Contains(t, logs.String(), "file="+file)
	require.Contains(t, logs.String(), "byte=")
	srv := httptest.NewServer(h2.b.AdminHandler())
	defer srv.Close()
	_, body := do(t, srv, "GET", "/metrics", "")
	require.Contains(t, body, "felix_storage_corruptions_total 1")
}
