package main

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/cpuprofile"
	"github.com/felixmq/felix/internal/devtls"
)

// memoryRunEnv lengthens TestNonReadingSubscribersKeepBrokerMemoryBounded's
// publish phase (default 4s; the figures in docs/RELIABILITY.md are 30s).
const memoryRunEnv = "FELIX_MEMORY_RUN"

// brokerMemoryBound is the anonymous resident memory the broker may reach
// in the test below (the durable log's mapped pages are page cache the
// kernel can reclaim, reported apart), per docs/RELIABILITY.md's memory
// model: what an idle broker holds, plus, twice over for Go's garbage
// collector (GOGC=100 lets the heap reach twice what is live), the one
// stream's queued buffers (FELIX_SUBSCRIBER_QUEUE_BYTES at its default,
// counted once
// however many subscribers share them, and up to twice that for the pool's
// power-of-two size classes) and the batch each subscriber's writer holds
// while the subscriber does not read (one 64 × 4 KiB publish batch, a
// 512 KiB size class).
const (
	idleBrokerBytes   = 32 << 20
	testQueueBytes    = 64 << 20 // FELIX_SUBSCRIBER_QUEUE_BYTES's default
	testSubscribers   = 100
	testBatchClass    = 512 << 10
	brokerMemoryBound = idleBrokerBytes + 2*(2*testQueueBytes+testSubscribers*testBatchClass)
)

// 100 subscribers that never read, on an ephemeral and on a durable stream,
// while a publisher runs: the broker's memory stays within
// brokerMemoryBound. Their queues fill (ephemeral: then drop, counted; the
// 100 queues share the same buffers) or overflow into catch-up (durable:
// then hold nothing until they read again).
func TestNonReadingSubscribersKeepBrokerMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker process under load")
	}
	run := 4 * time.Second
	if s := os.Getenv(memoryRunEnv); s != "" {
		var err error
		run, err = time.ParseDuration(s)
		require.NoError(t, err)
	}
	for _, stream := range []string{"demo", "logged"} {
		t.Run(stream, func(t *testing.T) {
			bp := startBrokerProcess(t, "FELIX_DATA_DIR="+filepath.Join(t.TempDir(), "data"),
				"FELIX_STREAMS=t1/default/demo:1,t1/default/logged:1:periodic")
			ctx, cancel := context.WithTimeout(context.Background(), run+60*time.Second)
			defer cancel()
			idle := rssOf(t, bp.cmd.Process.Pid)
			for range testSubscribers {
				c := dialProcess(t, bp, client.Config{StreamReceiveWindow: 1 << 20, ConnectionReceiveWindow: 1 << 20, SubscriptionBuffer: 1})
				_, err := c.Subscribe(ctx, "default", stream, client.SubscribeOptions{})
				require.NoError(t, err)
			}
			pub, err := bp.dial(t).NewPublisher(ctx, "default", stream)
			require.NoError(t, err)
			batch := make([][]byte, 64)
			for i := range batch {
				batch[i] = make([]byte, 4096)
			}
			// 40 MB/s keeps the durable run's disk use small.
			tick := time.NewTicker(6 * time.Millisecond)
			defer tick.Stop()
			var peak cpuprofile.ProcessMemory
			deadline := time.Now().Add(run)
			for sent := 0; time.Now().Before(deadline); sent++ {
				require.NoError(t, pub.Send(batch))
				<-tick.C
				if sent%16 == 0 {
					peak = maxMemory(peak, rssOf(t, bp.cmd.Process.Pid))
				}
			}
			require.NoError(t, pub.Close(ctx))
			t.Logf("%s: broker RSS idle %d MiB anon + %d MiB file; peak over %v: %d MiB anon + %d MiB file (bound %d MiB anon)",
				stream, idle.RSSAnonBytes>>20, idle.RSSFileBytes>>20, run, peak.RSSAnonBytes>>20, peak.RSSFileBytes>>20, brokerMemoryBound>>20)
			require.LessOrEqual(t, peak.RSSAnonBytes, uint64(brokerMemoryBound))
		})
	}
}

// dialProcess is bp.dial with cfg (tenant, token and TLS filled in).
func dialProcess(t *testing.T, bp *brokerProcess, cfg client.Config) *client.Client {
	t.Helper()
	pem, err := os.ReadFile(bp.cert)
	require.NoError(t, err)
	pool, err := devtls.Pool(pem)
	require.NoError(t, err)
	cfg.Tenant, cfg.Token, cfg.TLS = "t1", "dev", &tls.Config{RootCAs: pool}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, bp.addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// rssOf is pid's resident memory; the test skips where it cannot be read.
func rssOf(t *testing.T, pid int) cpuprofile.ProcessMemory {
	t.Helper()
	m, err := cpuprofile.Memory(pid)
	if errors.Is(err, cpuprofile.ErrNotSupported) {
		t.Skipf("no process memory here: %v", err)
	}
	require.NoError(t, err)
	return m
}

func maxMemory(a, b cpuprofile.ProcessMemory) cpuprofile.ProcessMemory {
	return cpuprofile.ProcessMemory{RSSAnonBytes: max(a.RSSAnonBytes, b.RSSAnonBytes), RSSFileBytes: max(a.RSSFileBytes, b.RSSFileBytes)}
}
