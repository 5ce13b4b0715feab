package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/internal/testutil"
)

// killRoundsEnv sets the number of kill -9 rounds (default 4; `make
// reliability` runs more).
const killRoundsEnv = "FELIX_KILL_ROUNDS"

// TestKill9UnderLoadLosesNoAckedRecord is the reliability issue's kill -9
// scenario on the real binary: a publisher pipelines acked publishes to an
// on_commit durable stream and a subscriber follows it by offset, both
// reconnecting on their own, while the broker is killed with SIGKILL at
// random moments and restarted on the same address, certificate and data
// directory. Every acked record must reach the subscriber exactly once, in
// offset order with no gap, across every restart.
func TestKill9UnderLoadLosesNoAckedRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a broker process several times")
	}
	rounds := killRounds(t, 4)
	kb := newKillableBroker(t)
	kb.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*10*time.Second+30*time.Second)
	defer cancel()

	pubCtx, stopPub := context.WithCancel(ctx)
	acked := &seqSet{m: map[uint64]bool{}}
	sub := &resumer{seen: map[uint64]bool{}}
	var wg sync.WaitGroup
	wg.Go(func() { kb.publish(pubCtx, acked, nil) })
	subCtx, stopSub := context.WithCancel(ctx)
	wg.Go(func() { sub.follow(subCtx, kb) })

	for r := range rounds {
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		before := acked.len()
		kb.kill(t)
		restarted := time.Now()
		kb.start(t)
		// Recovery: the first ack after the restart.
		require.Eventually(t, func() bool { return acked.len() > before }, 20*time.Second, 5*time.Millisecond,
			"round %d: no publish acked after the restart", r)
		t.Logf("round %d: killed with %d acked; publishing again %v after the restart", r, before, time.Since(restarted).Round(time.Millisecond))
	}
	time.Sleep(300 * time.Millisecond)
	stopPub()
	// The subscriber must catch up with everything acked.
	sub.awaitCovers(t, kb, acked.snapshot(), "after the last restart")
	stopSub()
	wg.Wait()
	require.NoError(t, sub.failure(), "offsets out of order or a record delivered twice")
	t.Logf("%d kills: %d records acked, %d delivered (exactly once, offsets contiguous), %d resubscribes",
		rounds, acked.len(), sub.count(), sub.resubscribes)
}

// killRounds is FELIX_KILL_ROUNDS, or def.
func killRounds(t *testing.T, def int) int { return envCount(t, killRoundsEnv, def) }

// envCount is the count the environment variable name sets (a long
// scenario's knob: make reliability sets it), or def when it is unset.
func envCount(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	return n
}

// killableBroker is a broker process on a fixed address, certificate and
// data directory, so a restart is the same broker to its clients.
type killableBroker struct {
	env      []string
	addr     string
	pool     *x509.CertPool
	certFile string
	// serverName is the name the certificate is checked against when addr
	// is not one of its addresses (a proxy's); "" checks addr's host.
	serverName string
	bp         *brokerProcess
}

func newKillableBroker(t *testing.T) *killableBroker {
	dir := t.TempDir()
	certFile, keyFile, pool := writeCert(t, dir)
	kb := &killableBroker{addr: freeAddr(t, "udp"), pool: pool, certFile: certFile}
	kb.env = []string{"FELIX_QUIC_BIND=" + kb.addr, "FELIX_TLS_CERT_FILE=" + certFile, "FELIX_TLS_KEY_FILE=" + keyFile,
		"FELIX_DATA_DIR=" + filepath.Join(dir, "data"), "FELIX_STREAMS=t1/default/orders:1:on_commit"}
	return kb
}

func (kb *killableBroker) start(t *testing.T) {
	cmd := brokerCmd(t, append([]string{"FELIX_ADMIN_BIND=" + freeAddr(t, "tcp")}, kb.env...))
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "felix-broker ready") {
	}
	go io.Copy(io.Discard, stderr)
	kb.bp = &brokerProcess{cmd: cmd, addr: kb.addr, exited: make(chan error, 1)}
	go func() { kb.bp.exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
}

func (kb *killableBroker) kill(t *testing.T) {
	require.NoError(t, kb.bp.cmd.Process.Kill())
	<-kb.bp.exited
}

// dial connects with a short handshake bound: a broker that is down is
// retried, not waited for.
func (kb *killableBroker) dial(ctx context.Context) (*client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return client.Dial(dctx, kb.addr, client.Config{Tenant: "t1", Token: "dev",
		TLS: &tls.Config{RootCAs: kb.pool, ServerName: kb.serverName}})
}

// publish pipelines acked publishes of fresh sequence numbers, redialling
// after any failure; an unacked publish is never retried, so a sequence
// number is in the log at most once.
func (kb *killableBroker) publish(ctx context.Context, acked *seqSet, lat *latencies) {
	kb.publishTo(ctx, "orders", acked, lat)
}

// publishTo is publish to another stream.
func (kb *killableBroker) publishTo(ctx context.Context, stream string, acked *seqSet, lat *latencies) {
	var seq uint64
	for ctx.Err() == nil {
		c, err := kb.dial(ctx)
		if err != nil {
			continue
		}
		pub, err := c.NewPublisher(ctx, "default", stream)
		if err == nil {
			seq = publishBatch(ctx, pub, seq, acked, lat)
		}
		c.Close()
	}
}

// publishBatch publishes until the publisher fails, 64 in flight,
// recording each ack's latency in lat (may be nil).
func publishBatch(ctx context.Context, pub *client.Publisher, seq uint64, acked *seqSet, lat *latencies) uint64 {
	window := make(chan struct{}, 64)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ; ctx.Err() == nil && pub.Err() == nil; seq++ {
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return seq
		}
		payload := binary.BigEndian.AppendUint64(make([]byte, 0, 128), seq)
		pa := pub.PublishAsync([][]byte{payload[:128]})
		wg.Go(func() {
			defer func() { <-window }()
			if pa.Wait(ctx) == nil {
				acked.add(binary.BigEndian.Uint64(payload))
				lat.add(pa.Latency())
			}
		})
	}
	return seq
}

// resumer follows the stream from the earliest offset, resubscribing from
// the next expected offset after every failure or drop report, and checks
// what arrives: offsets contiguous, no record twice.
type resumer struct {
	mu           sync.Mutex
	next         uint64
	seen         map[uint64]bool
	err          error
	resubscribes int
	gaps         int // drop reports, each answered by resubscribing
}

func (r *resumer) follow(ctx context.Context, kb *killableBroker) {
	for ctx.Err() == nil {
		c, err := kb.dial(ctx)
		if err != nil {
			continue
		}
		r.mu.Lock()
		from := client.Offset(r.next)
		r.resubscribes++
		r.mu.Unlock()
		sub, err := c.Subscribe(ctx, "default", "orders", client.SubscribeOptions{From: from})
		for err == nil {
			var ev client.Event
			if ev, err = sub.Next(ctx); err == nil {
				err = r.check(ev)
			}
		}
		c.Close()
	}
}

// errGap ends a subscription whose broker queue overflowed (the live tail
// is at-most-once): the resumer reads the dropped records back from the
// log by subscribing again from its next offset.
var errGap = errors.New("gap: resubscribing from the next offset")

func (r *resumer) check(ev client.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Dropped > 0 {
		r.gaps++
		return errGap
	}
	seq := binary.BigEndian.Uint64(ev.Payload)
	switch {
	case !ev.HasOffset || ev.Offset != r.next:
		r.fail(fmt.Errorf("offset %d (has %v), want %d", ev.Offset, ev.HasOffset, r.next))
	case r.seen[seq]:
		r.fail(fmt.Errorf("record %d delivered twice (offset %d)", seq, ev.Offset))
	}
	r.seen[seq] = true
	r.next = ev.Offset + 1
	return nil
}

func (r *resumer) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *resumer) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *resumer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// covers reports whether every acked sequence number was seen.
func (r *resumer) covers(acked *seqSet) bool { return r.coversAll(acked.snapshot()) }

// missing describes which of seqs the subscriber has not seen, and where
// it stands: what a failed catch-up check needs to tell a lost record
// from a stuck subscriber.
func (r *resumer) missing(seqs []uint64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int
	lowest := ^uint64(0)
	for _, s := range seqs {
		if !r.seen[s] {
			n++
			lowest = min(lowest, s)
		}
	}
	return fmt.Sprintf("%d of %d acked records not seen (lowest sequence %d); subscriber at offset %d after %d records, %d resubscribes, %d drop reports, error %v",
		n, len(seqs), lowest, r.next, len(r.seen), r.resubscribes, r.gaps, r.err)
}

// awaitCovers waits until the subscriber has seen every one of acked's
// records, and fails the test with what is missing if it does not, and
// with what a fresh subscription from the subscriber's offset reads.
func (r *resumer) awaitCovers(t *testing.T, kb *killableBroker, acked []uint64, what string) {
	t.Helper()
	why := lazyString(func() string { return r.missing(acked) + "; " + r.probe(kb) })
	testutil.Eventually(t, 20*time.Second, func() bool { return r.coversAll(acked) },
		"%s: the subscriber never saw every acked record: %s", what, why)
}

// lazyString is formatted only when printed: a failure's diagnosis that
// costs a probe of the broker.
type lazyString func() string

func (f lazyString) String() string { return f() }

// probe reads the stream for two seconds from the subscriber's next
// offset on a connection of its own.
func (r *resumer) probe(kb *killableBroker) string {
	r.mu.Lock()
	from := r.next
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := kb.dial(ctx)
	if err != nil {
		return fmt.Sprintf("probe: dial: %v", err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, "default", "orders", client.SubscribeOptions{From: client.Offset(from)})
	var n int
	var last uint64
	for err == nil {
		var ev client.Event
		if ev, err = sub.Next(ctx); err == nil {
			n, last = n+1, ev.Offset
		}
	}
	return fmt.Sprintf("a fresh subscription from offset %d read %d records up to offset %d (%v)", from, n, last, err)
}

type seqSet struct {
	mu sync.Mutex
	m  map[uint64]bool
}

func (s *seqSet) add(v uint64) { s.mu.Lock(); s.m[v] = true; s.mu.Unlock() }
func (s *seqSet) len() int     { s.mu.Lock(); defer s.mu.Unlock(); return len(s.m) }

// writeCert writes a fresh self-signed certificate and its key to dir (for
// FELIX_TLS_CERT_FILE / FELIX_TLS_KEY_FILE) and returns a pool trusting it.
func writeCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(cert.TLS.PrivateKey)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, cert.PEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	pool, err = devtls.Pool(cert.PEM)
	require.NoError(t, err)
	return certFile, keyFile, pool
}
