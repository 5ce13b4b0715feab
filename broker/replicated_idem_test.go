package broker_test

import (
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/testutil"
)

// TestReopenedReplicaReadsItsProducersBeforeItLeads: a replica opened on a
// log that holds idempotent batches reads their producers in the
// background, so that when it comes to lead, its first idempotent batch
// waits for a read of what came after them, not of the whole log (a walk
// under the lock every idempotent publish of the shard takes).
func TestReopenedReplicaReadsItsProducersBeforeItLeads(t *testing.T) {
	logs := &logLines{}
	rc := startRaftClusterWith(t, &raftCluster{logger: logs.logger})
	ctx := ctxT(t, 60*time.Second)
	lead := rc.leader()
	f := (lead + 1) % 3
	pub, err := rc.nodes[lead].dialWith(t, client.Config{TLS: rc.tls}).NewIdempotentPublisher(ctx, "default", "rf3", client.IdempotentOptions{})
	require.NoError(t, err)
	const batches = 40
	for i := range batches {
		_, err := pub.Publish(ctx, [][]byte{fmt.Appendf(nil, "a%d", i)})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return rc.sameCommit(0, 1, 2) }, 10*time.Second, 20*time.Millisecond)

	rc.stop(f)
	rc.start(f)
	rc.place()
	require.Eventually(t, func() bool { return logs.read(rc.ids[f], "producer state read from the log") > 0 },
		10*time.Second, 10*time.Millisecond, "the reopened replica reads its producers")
	prebuilt := logs.read(rc.ids[f], "producer state read from the log")

	require.Eventually(t, func() bool {
		if rc.leader() == f {
			return true
		}
		code, _ := rc.stepDown(rc.leader(), "", `{"to":"`+rc.ids[f]+`"}`)
		return code == 200
	}, 20*time.Second, 20*time.Millisecond)
	pub2, err := rc.nodes[f].dialWith(t, client.Config{TLS: rc.tls}).NewIdempotentPublisher(ctx, "default", "rf3", client.IdempotentOptions{})
	require.NoError(t, err)
	_, err = pub2.Publish(ctx, [][]byte{[]byte("b0")})
	require.NoError(t, err)
	rebuilt := logs.read(rc.ids[f], "producer state rebuilt from the log")
	require.LessOrEqual(t, prebuilt+rebuilt, batches, "no batch is read twice")
	t.Logf("%s read %d batches when it opened and %d when it came to lead", rc.ids[f], prebuilt, rebuilt)
}

// logLines keeps the brokers' log lines.
type logLines struct{ testutil.LockedBuffer }

func (l *logLines) logger(id string) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, nil)).With("node", id)
}

var batchesRead = regexp.MustCompile(`batches_read=(\d+)`)

// read sums batches_read over node's lines with message msg.
func (l *logLines) read(node, msg string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, fmt.Sprintf("msg=%q", msg)) && strings.Contains(line, " node="+node+" ") {
			if m := batchesRead.FindStringSubmatch(line); m != nil {
				k, _ := strconv.Atoi(m[1])
				n += k
			}
		}
	}
	return n
}
