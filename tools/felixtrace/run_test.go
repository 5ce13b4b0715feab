package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/internal/testutil"
)

// The "done when": felixtrace against a broker under load shows
// non-zero, plausible numbers in every column, checked in its JSON. With
// --bpf as root the probes see net_rx softirq time; as any other user the
// same run degrades to /proc with one line.
func TestTraceBrokerUnderLoad(t *testing.T) {
	tb := startBroker(t, broker.Config{DataDir: t.TempDir(), Queue: fanout.Config{Capacity: 256}},
		spec("live", false), spec("orders", true))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	loadCtx, stopLoad := context.WithCancel(ctx)
	wait := load(loadCtx, t, tb)
	defer func() { stopLoad(); wait() }()
	// The baseline scrape comes once the load flows: the subscriber that
	// never reads has filled its queue.
	sc := newScraper(tb.admin, time.Second)
	testutil.Eventually(t, 10*time.Second, func() bool {
		st, err := sc.scrape(ctx)
		return err == nil && st.DroppedEvents > 0
	}, "no drops: the load does not reach the broker")

	file := filepath.Join(t.TempDir(), "trace.json")
	var stdout, stderr bytes.Buffer
	cfg := Config{Admin: tb.admin, Interval: 300 * time.Millisecond, Duration: 900 * time.Millisecond,
		BPF: true, JSONFile: file, Top: 4}
	sum, err := run(ctx, cfg, &stdout, &stderr)
	require.NoError(t, err)
	stopLoad()
	wait()
	t.Logf("felixtrace output:\n%s%s", stdout.String(), stderr.String())

	start, samples, summary := readJSON(t, file)
	require.Len(t, samples, 3)
	require.Equal(t, 3, summary.Samples)
	require.Equal(t, sum.Commit.Syncs, summary.Commit.Syncs, "the JSON summary is the printed one")
	for _, col := range []string{"CONNECTION", "RTT", "MTU", "LOST", "CONG", "THREAD", "COMMIT", "FANOUT", "SYSTEM", "summary"} {
		require.Contains(t, stdout.String(), col)
	}

	for i, s := range samples {
		requirePlausible(t, i, &s, cfg.Interval)
	}
	// Counts that need the whole run: drops from the full queue, losses and
	// congestion events on the relayed connection.
	require.Positive(t, summary.Fanout.Drops, "the subscriber that never reads dropped nothing")
	var lost, congestion uint64
	for _, c := range summary.Connections {
		lost += c.Lost
		congestion += c.CongestionEvents
	}
	require.Positive(t, lost, "the relay's blackouts lost no packet")
	require.Positive(t, congestion, "the relay's blackouts caused no congestion event")
	requireSoftirqAndIOWaitFields(t, file)

	requireBPFOrOneLine(t, start, samples, summary, stderr.String())
}

// requirePlausible checks one sample of the loaded broker, column by column.
func requirePlausible(t *testing.T, i int, s *Sample, interval time.Duration) {
	t.Helper()
	require.InDelta(t, interval, s.Interval, float64(200*time.Millisecond), "sample %d", i)
	// Connections: every one is on loopback (MTU policy 1452) and has
	// an RTT; the two busiest carry bytes both ways (the third is the
	// stalled subscriber's, which QUIC flow control holds still).
	require.Len(t, s.Connections, 3, "sample %d", i)
	for _, c := range s.Connections {
		require.Equal(t, 1452, c.MTU, "%s", c.Remote)
		require.Positive(t, c.RTT, "%s", c.Remote)
		require.Less(t, c.RTT, time.Second, "%s", c.Remote)
	}
	for _, c := range s.Connections[:2] {
		require.Positive(t, c.BytesInRate, "%s", c.Remote)
		require.Positive(t, c.BytesOutRate, "%s", c.Remote)
	}
	// Threads: some thread of the broker worked, no thread beyond a CPU.
	require.NotNil(t, s.Process, s.CPUUnavailable)
	require.Positive(t, s.Process.CPU)
	require.Positive(t, s.Threads[0].CPU)
	require.LessOrEqual(t, s.Threads[0].CPU, 100.0+10, "a thread above one CPU: %+v", s.Threads[0])
	// Commit: on_commit publishes wait for syncs, several per sync.
	require.Equal(t, 1, s.Commit.DurableShards)
	require.Positive(t, s.Commit.Syncs)
	require.GreaterOrEqual(t, s.Commit.WaitersPerSync, 1.0)
	require.Positive(t, s.Commit.SyncP99)
	require.GreaterOrEqual(t, s.Commit.SyncP99, s.Commit.SyncP50)
	// Fanout: four subscriptions; the one that never reads is full.
	require.Equal(t, 4, s.Fanout.Subscriptions)
	require.Equal(t, 256, s.Fanout.MaxDepthCapacity)
	require.Positive(t, s.Fanout.MaxDepth)
	require.Positive(t, s.Fanout.Delivered)
	// System: a split that adds up to the whole machine.
	require.NotNil(t, s.System)
	y := s.System
	require.Positive(t, y.User+y.System)
	require.InDelta(t, 100, y.User+y.System+y.IRQ+y.SoftIRQ+y.IOWait+y.Steal+y.Idle, 15)
}

// requireBPFOrOneLine: with --bpf as root the probes run and see net_rx
// time; otherwise one line on stderr and the /proc numbers.
func requireBPFOrOneLine(t *testing.T, start *startRecord, samples []Sample, summary *Summary, stderr string) {
	t.Helper()
	if start.BPF {
		require.Empty(t, stderr)
		var netRX time.Duration
		for _, s := range samples {
			require.NotNil(t, s.BPF)
			require.Equal(t, "net_rx", s.BPF.Softirq[3].Name)
			netRX += s.BPF.Softirq[3].Time
		}
		require.Positive(t, netRX, "no net_rx softirq time under loopback load")
		require.NotNil(t, summary.BPF)
		return
	}
	if os.Geteuid() == 0 {
		t.Logf("running as root but the probes did not load: %s", start.BPFUnavailable)
	}
	require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	require.Contains(t, stderr, "felixtrace: eBPF probes unavailable (")
	require.Nil(t, summary.BPF)
}

// The JSON carries softirq and iowait even when they are zero: a reader
// tells "none" from "not measured".
func requireSoftirqAndIOWaitFields(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	var first struct {
		Sample struct {
			System map[string]any `json:"system"`
		} `json:"sample"`
	}
	require.NoError(t, json.Unmarshal(lines[1], &first))
	for _, k := range []string{"softirq_pct", "iowait_pct", "user_pct", "system_pct", "idle_pct"} {
		require.Contains(t, first.Sample.System, k)
	}
}

func TestUnreachableBrokerFails(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := cliMain(context.Background(), []string{"--admin", "127.0.0.1:1", "--duration", "1s"}, &stdout, &stderr)
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr.String(), "cannot read the broker's stats")
	require.Empty(t, stdout.String())
}

// Ctrl-C (the context ending) stops the run between samples and still
// prints and writes the summary.
func TestCancelPrintsSummary(t *testing.T) {
	admin := fakeAdmin(t)
	file := filepath.Join(t.TempDir(), "trace.json")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := run(ctx, Config{Admin: admin, Interval: 20 * time.Millisecond, JSONFile: file, Top: 3},
			cancelAfter{&stdout, 2, cancel}, &stderr)
		done <- err
	}()
	require.NoError(t, <-done)
	_, samples, summary := readJSON(t, file)
	require.GreaterOrEqual(t, len(samples), 2)
	require.Equal(t, len(samples), summary.Samples)
	require.Contains(t, stdout.String(), "summary:")
	require.Equal(t, uint64(500), samples[0].Connections[0].BytesIn, "one scrape's growth")
	require.Equal(t, []string{"CPU unavailable: fake broker"}, summary.Notes)
	require.Contains(t, stdout.String(), "PROCESS   cpu unavailable: fake broker")
	require.Empty(t, stderr.String())
}

// cancelAfter cancels after n sample tables were written to it.
type cancelAfter struct {
	buf    *bytes.Buffer
	n      int
	cancel context.CancelFunc
}

func (w cancelAfter) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	if strings.Count(w.buf.String(), "── ") >= w.n {
		w.cancel()
	}
	return n, err
}
