package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/devdir"
	"github.com/felixmq/felix/internal/testutil"
)

// brokerProcess is the broker (this test binary re-executed) in its own
// process, as an orchestrator runs it.
type brokerProcess struct {
	cmd     *exec.Cmd
	addr    string // QUIC
	admin   string // admin HTTP host:port
	dataDir string // FELIX_DATA_DIR, when the test set one
	cert    string // the self-signed certificate it wrote
	exited  chan error
	log     *logSink // its stderr after "felix-broker ready"
}

// logSink counts what a broker process logs and keeps the first
// logSinkKeep bytes of it.
type logSink struct {
	mu    sync.Mutex
	n     int64
	lines []string
	kept  int
}

const logSinkKeep = 1 << 20

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n += int64(len(p))
	if s.kept < logSinkKeep {
		s.lines = append(s.lines, string(p))
		s.kept += len(p)
	}
	return len(p), nil
}

// bytes is how much the broker has logged since it was ready.
func (s *logSink) bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// text is what was kept of the log.
func (s *logSink) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "")
}

func startBrokerProcess(t *testing.T, env ...string) *brokerProcess {
	dir := t.TempDir()
	bp := &brokerProcess{addr: freeAddr(t, "udp"), admin: freeAddr(t, "tcp"), cert: filepath.Join(dir, "cert.pem"), exited: make(chan error, 1)}
	bp.cmd = brokerCmd(t, append([]string{"FELIX_QUIC_BIND=" + bp.addr, "FELIX_ADMIN_BIND=" + bp.admin,
		"FELIX_DEV_DIR=" + dir}, env...))
	stderr, err := bp.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, bp.cmd.Start())
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "felix-broker ready") {
	}
	bp.log = &logSink{}
	copied := make(chan struct{})
	go func() { io.Copy(bp.log, stderr); close(copied) }()
	go func() { <-copied; bp.exited <- bp.cmd.Wait() }()
	t.Cleanup(func() { bp.cmd.Process.Kill() })
	return bp
}

// dial connects a client of t1 with the embedded control plane's token
// when it runs, else with any token (the dev verifier).
func (bp *brokerProcess) dial(t *testing.T) *client.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, bp.addr, client.Config{Tenant: "t1", Token: bp.token(), TLS: bp.clientTLS(t)})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// token is the embedded control plane's dev token, or "dev".
func (bp *brokerProcess) token() string {
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(bp.cert), devdir.TokenFile))
	if err != nil {
		return "dev"
	}
	return strings.TrimSpace(string(raw))
}

// ackLog records which sequence numbers were acked and signals when a
// threshold is reached.
type ackLog struct {
	mu        sync.Mutex
	acked     map[uint64]bool
	threshold int
	reached   chan struct{}
}

func (l *ackLog) add(i uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[i] = true
	if len(l.acked) == l.threshold {
		close(l.reached)
	}
}

// publishUntilClosed pipelines acked publishes of sequence numbers until the
// broker stops taking them, recording each ok ack.
func publishUntilClosed(ctx context.Context, pub *client.Publisher, log *ackLog) {
	window := make(chan struct{}, 128)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := uint64(0); ctx.Err() == nil && pub.Err() == nil; i++ {
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return
		}
		payload := binary.BigEndian.AppendUint64(make([]byte, 0, 256), i)
		pa := pub.PublishAsync([][]byte{payload[:256]})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-window }()
			if pa.Wait(ctx) == nil {
				log.add(i)
			}
		}()
	}
}

// Drain: a real SIGTERM to a broker process under load: it
// exits 0 within the drain budget and no acked publish is missing at a
// subscriber that stayed connected.
func TestSIGTERMUnderLoadLosesNoAckedPublish(t *testing.T) {
	const budget = 5 * time.Second
	// The lossless policy: under drop_new a drop would be reported, not lost,
	// but this test is about the drain, so nothing may be dropped at all.
	bp := startBrokerProcess(t, "FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000", "FELIX_SUBSCRIBER_QUEUE_POLICY=block")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := bp.dial(t).Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
	require.NoError(t, err)
	pub, err := bp.dial(t).NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)

	log := &ackLog{acked: map[uint64]bool{}, threshold: 2000, reached: make(chan struct{})}
	pubDone := make(chan struct{})
	go func() { defer close(pubDone); publishUntilClosed(ctx, pub, log) }()
	received := map[uint64]bool{}
	dropped := uint64(0)
	subDone := make(chan error, 1)
	go func() {
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				subDone <- err
				return
			}
			dropped += ev.Dropped
			if ev.Dropped == 0 {
				received[binary.BigEndian.Uint64(ev.Payload)] = true
			}
		}
	}()

	select { // under load: stop it the way an orchestrator does
	case <-log.reached:
	case <-ctx.Done():
		t.Fatal("load did not build up")
	}
	start := time.Now()
	require.NoError(t, bp.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-bp.exited:
		require.NoError(t, err, "broker must exit 0 after SIGTERM")
	case <-time.After(budget + 5*time.Second):
		t.Fatal("broker did not exit within the drain budget")
	}
	elapsed := time.Since(start)
	<-pubDone
	require.ErrorIs(t, <-subDone, client.ErrClosed, "the event stream ends cleanly")

	log.mu.Lock()
	defer log.mu.Unlock()
	missing := 0
	for i := range log.acked {
		if !received[i] {
			missing++
		}
	}
	t.Logf("SIGTERM under load: exit 0 after %v; %d acked, %d received, %d dropped by the queue, %d acked but missing",
		elapsed, len(log.acked), len(received), dropped, missing)
	require.Less(t, elapsed, budget)
	require.Zero(t, missing, "acked publishes missing at the subscriber")
}

// TestCleanShutdownLogsNoError: every SIGTERM of a broker with its
// embedded control plane logged an ERROR (the feed's long-poll, cut by the
// shutdown, "request failed ... context canceled"). A clean shutdown now
// exits 0 with no ERROR line.
func TestCleanShutdownLogsNoError(t *testing.T) {
	bp := startBrokerProcess(t, "FELIX_EMBEDDED_CONTROLPLANE_BIND=127.0.0.1:0")
	// A stream created at the control plane and served: the broker's feed
	// delivered it and is back in its long-poll.
	dir := filepath.Dir(bp.cert)
	url, err := os.ReadFile(filepath.Join(dir, devdir.ControlPlaneURLFile))
	require.NoError(t, err)
	code, body := testutil.Call(t, http.MethodPost, strings.TrimSpace(string(url))+"/v1/tenants/t1/namespaces/default/streams",
		`{"tenant":"t1","namespace":"default","stream":"late"}`, bp.token())
	require.Equal(t, http.StatusCreated, code, body)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pub, err := bp.dial(t).NewPublisher(ctx, "default", "late")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return pub.Publish(ctx, []byte("x")) == nil }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, bp.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-bp.exited:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30 s of SIGTERM")
	}
	require.Contains(t, bp.log.text(), "msg=stopped")
	require.NotContains(t, bp.log.text(), "level=ERROR")
}
