package main

import (
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/segment"
)

// felix sub --from-time starts at the first record appended at or after
// the time, over a log of several segments; a time before every record
// starts at the oldest, one after every record at the live tail.
func TestSubFromTimeStartsAtTheFirstRecordAtOrAfterIt(t *testing.T) {
	data := t.TempDir()
	tb := startBrokerWith(t, broker.Config{DataDir: data, Storage: segment.Config{SegmentBytes: 4096, IndexSpacingBytes: 256}},
		broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "demo"}, Shards: 1,
			Durable: true, Fsync: "periodic"})
	ctx := ctxT(t)
	c, err := client.Dial(ctx, tb.addr, client.Config{Tenant: "t1", Token: "dev", TLS: tb.bt.ClientTLS})
	require.NoError(t, err)
	defer c.Close()
	pub, err := c.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	before := time.Now()
	var marks []time.Time // marks[i]: taken after record i was acked
	for i := range 120 {
		require.NoError(t, pub.Publish(ctx, []byte(strings.Repeat("x", 90)+strconv.Itoa(i))))
		marks = append(marks, time.Now())
	}
	segments := 0
	require.NoError(t, filepath.WalkDir(data, func(p string, _ fs.DirEntry, err error) error {
		if strings.HasSuffix(p, ".log") {
			segments++
		}
		return err
	}))
	require.Greater(t, segments, 3, "the records span several segments")

	for _, first := range []int{0, 1, 57, 119} {
		at := before
		if first > 0 {
			at = marks[first-1] // after record first-1, before record first
		}
		r := runSubT(t, tb.args("--from-time", at.Format(time.RFC3339Nano), "--count", "1")...)
		require.Equal(t, 0, r.code, r.stderr)
		require.True(t, strings.HasPrefix(r.stdout, "0 "+strconv.Itoa(first)+" "), "from %s: %q", at, r.stdout)
		require.True(t, strings.HasSuffix(strings.TrimSpace(r.stdout), strconv.Itoa(first)), r.stdout)
	}
	r := runSubT(t, tb.args("--from-time", "2001-01-01T00:00:00Z", "--from", "earliest")...)
	require.Equal(t, exitUsage, r.code)
}

// felix pub --header K=V gives every message the headers; felix sub prints
// them between the offset and the payload (--json: in order, as "headers"),
// and events without none.
func TestPubHeadersShowInSub(t *testing.T) {
	tb := startBrokerWith(t, broker.Config{DataDir: t.TempDir()},
		broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "demo"}, Shards: 1, Durable: true})
	for _, idem := range []string{"true", "false"} {
		r := runPubT(t, "", tb.args("--ack", "--idempotent="+idem, "--header", "traceparent=00-ab-01", "--header", "content-type=text/plain", "hello")...)
		require.Equal(t, exitOK, r.code, r.stderr)
	}
	r := runPubT(t, "", tb.args("--ack", "plain")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runSubT(t, tb.args("--from", "earliest", "--count", "3")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "0 0 [traceparent=00-ab-01 content-type=text/plain] hello\n"+
		"0 1 [traceparent=00-ab-01 content-type=text/plain] hello\n0 2 plain\n", r.stdout)
	r = runSubT(t, tb.args("--from", "earliest", "--count", "1", "--json")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.JSONEq(t, `{"shard":0,"offset":0,"payload":"hello","headers":[`+
		`{"key":"traceparent","value":"00-ab-01"},{"key":"content-type","value":"text/plain"}]}`, r.stdout)
	r = runPubT(t, "", tb.args("--header", "novalue", "x")...)
	require.Equal(t, exitUsage, r.code)
	r = runPubT(t, "", tb.args("--ack", "--header", "k=v", "--key", "a", "keyed")...)
	require.Equal(t, exitOK, r.code, "the idempotent producer carries headers with a key: %s", r.stderr)
	r = runSubT(t, tb.args("--from", "3", "--shard", "0", "--count", "1")...)
	require.Equal(t, "0 3 [k=v] keyed\n", r.stdout, r.stderr)
	r = runPubT(t, "", tb.args("--header", "k=v", "--key", "a", "x")...)
	require.Equal(t, exitUsage, r.code, "plain publishes carry headers without a key or shard only")
}
