package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/internal/devtls"
)

// TestTraceUnderLoadgen is the check as a user runs it: the real
// felix-loadgen binary (built here) drives a durable on_commit stream with
// two publishers and two subscribers while felixtrace samples the broker;
// every column is non-zero and plausible (loadgen's --via-proxy loses 1%
// of the datagrams, so the loss and congestion columns fill too).
func TestTraceUnderLoadgen(t *testing.T) {
	if testing.Short() {
		t.Skip("builds felix-loadgen")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain on PATH to build felix-loadgen")
	}
	dir := t.TempDir()
	lg := filepath.Join(dir, "felix-loadgen")
	out, err := exec.Command(gobin, "build", "-o", lg, "github.com/felixmq/felix/tools/loadgen").CombinedOutput()
	require.NoError(t, err, "%s", out)

	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	caFile := filepath.Join(dir, "cert.pem")
	require.NoError(t, os.WriteFile(caFile, cert.PEM, 0o600))
	tb := startBrokerWithCert(t, broker.Config{DataDir: t.TempDir()}, cert)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var lgOut bytes.Buffer
	cmd := exec.CommandContext(ctx, lg, "--addr", tb.addr, "--admin", tb.admin, "--ca", caFile, "--token", "dev",
		"--profile", "throughput", "--ack", "batch", "--durable", "--fsync", "on_commit",
		"--publishers", "2", "--subscribers", "2", "--payload", "1KiB", "--duration", "4s", "--warmup", "500ms",
		// through loadgen's impairment proxy, so the loss and congestion
		// columns have something to show too
		"--via-proxy", "--proxy-loss", "0.01")
	cmd.Stdout, cmd.Stderr = &lgOut, &lgOut
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	time.Sleep(time.Second) // past connecting and the warm-up's start
	file := filepath.Join(dir, "trace.json")
	var stdout, stderr bytes.Buffer
	_, err = run(ctx, Config{Admin: tb.admin, Interval: 400 * time.Millisecond, Duration: 1200 * time.Millisecond,
		JSONFile: file, Top: 8}, &stdout, &stderr)
	require.NoError(t, err)
	require.NoError(t, <-done, "felix-loadgen:\n%s", lgOut.String())
	t.Logf("felixtrace:\n%s\nfelix-loadgen:\n%s", stdout.String(), lgOut.String())

	_, samples, summary := readJSON(t, file)
	var lost, congestion uint64
	for _, c := range summary.Connections {
		lost += c.Lost
		congestion += c.CongestionEvents
	}
	require.Positive(t, lost, "the proxy's 1% loss shows as lost packets")
	require.Positive(t, congestion, "and as congestion events")
	require.Len(t, samples, 3)
	for i, s := range samples {
		// 2 publishers + 2 subscribers, each its own connection.
		require.Len(t, s.Connections, 4, "sample %d", i)
		var in, out float64
		for _, c := range s.Connections {
			require.Positive(t, c.RTT, "sample %d: rtt", i)
			require.Equal(t, 1452, c.MTU, "sample %d: loopback MTU", i)
			in, out = in+c.BytesInRate, out+c.BytesOutRate
		}
		require.Greater(t, in, 1e5, "sample %d: bytes in/s", i)
		require.Greater(t, out, 1e5, "sample %d: bytes out/s", i)
		require.NotEmpty(t, s.Threads, "sample %d", i)
		require.Positive(t, s.Threads[0].CPU, "sample %d: busiest thread CPU", i)
		require.NotNil(t, s.Process)
		require.Positive(t, s.Commit.Syncs, "sample %d: on_commit syncs", i)
		require.GreaterOrEqual(t, s.Commit.WaitersPerSync, 1.0)
		require.Positive(t, s.Commit.SyncP50)
		require.GreaterOrEqual(t, s.Fanout.Subscriptions, 2, "a subscription per subscriber and shard")
		require.Positive(t, s.Fanout.Delivered, "sample %d: delivered", i)
		require.NotNil(t, s.System)
		require.Positive(t, s.System.User+s.System.System)
	}
}
