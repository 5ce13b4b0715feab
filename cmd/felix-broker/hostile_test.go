package main

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/wire"
)

// Limits the hostile-client test runs the broker with (each a registered
// knob); the swarm is sized to cross every one of them.
var hostileEnv = []string{
	"FELIX_MAX_CONNECTIONS=48", "FELIX_MAX_STREAMS_PER_CONN=64", "FELIX_MAX_SUBSCRIPTIONS_PER_CONN=20",
	"FELIX_AUTH_TIMEOUT_MS=500", // frames keep the default 16 MiB cap: announce() aims at it
}

// hostileRSSBoundMiB is the memory the broker may reach under the swarm.
const hostileRSSBoundMiB = 512

// TestHostileClientsAreContained is the reliability issue's hostile-client
// scenario on the real binary: while a well-behaved client publishes
// (acked, sequential), a swarm sends malformed and oversized frames, opens
// streams it never authenticates, floods handshakes past the connection
// limit and subscribes past the subscription limit without ever reading.
// The broker must enforce each limit, stay under hostileRSSBoundMiB, and
// keep the good client's ack p99 within 20x of its p99 before the swarm.
func TestHostileClientsAreContained(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker process under a client swarm")
	}
	// With small limits the swarm crosses every one of them; with the
	// defaults it crosses none but the frame cap, and the defaults must
	// still keep the broker within the memory bound and serving.
	t.Run("limits", func(t *testing.T) { hostileRun(t, true, hostileEnv...) })
	t.Run("defaults", func(t *testing.T) { hostileRun(t, false) })
}

func hostileRun(t *testing.T, limits bool, env ...string) {
	bp := startBrokerProcess(t, env...)
	pem, err := os.ReadFile(bp.cert)
	require.NoError(t, err)
	pool, err := devtls.Pool(pem)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	good := bp.dial(t)
	pub, err := good.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	before := ackLatencies(ctx, t, pub, time.Second)

	swarmCtx, stopSwarm := context.WithCancel(ctx)
	sw := &swarm{addr: bp.addr, tls: &tls.Config{RootCAs: pool, NextProtos: []string{client.ALPN}}}
	var wg sync.WaitGroup
	sw.start(swarmCtx, &wg)
	time.Sleep(500 * time.Millisecond) // let the swarm reach its limits
	peakRSS := atomic.Int64{}
	wg.Go(func() { sampleRSS(swarmCtx, bp.cmd.Process.Pid, &peakRSS) })
	during := ackLatencies(ctx, t, pub, 2*time.Second)
	stopSwarm()
	wg.Wait()

	p99b, p99d := quantile(before, 0.99), quantile(during, 0.99)
	t.Logf("good client ack p50/p99 before %v/%v, during the swarm %v/%v (x%.1f); broker peak RSS %d MiB",
		quantile(before, 0.5), p99b, quantile(during, 0.5), p99d, float64(p99d)/float64(p99b), peakRSS.Load()>>20)
	t.Logf("swarm: %d handshakes refused, %d subscriptions refused, %d malformed streams reset, %d silent streams reset, %d streams blocked at the limit",
		sw.refusedConns.Load(), sw.refusedSubs.Load(), sw.malformedReset.Load(), sw.silentReset.Load(), sw.streamBlocked.Load())
	require.Positive(t, sw.malformedReset.Load(), "malformed frames did not end their streams")
	if limits {
		require.Positive(t, sw.refusedConns.Load(), "FELIX_MAX_CONNECTIONS refused nothing")
		require.Positive(t, sw.refusedSubs.Load(), "FELIX_MAX_SUBSCRIPTIONS_PER_CONN refused nothing")
		require.Positive(t, sw.silentReset.Load(), "FELIX_AUTH_TIMEOUT_MS reset no silent stream")
		require.Positive(t, sw.streamBlocked.Load(), "FELIX_MAX_STREAMS_PER_CONN blocked no stream")
	}
	require.Less(t, peakRSS.Load()>>20, int64(hostileRSSBoundMiB))
	require.Less(t, float64(p99d), 20*float64(p99b)+float64(20*time.Millisecond), "the good client's p99 under the swarm")
	require.NoError(t, pub.Publish(ctx, []byte("still serving")))
}

// ackLatencies publishes sequentially for d and returns each ack latency.
func ackLatencies(ctx context.Context, t *testing.T, pub *client.Publisher, d time.Duration) []time.Duration {
	var out []time.Duration
	payload := make([]byte, 256)
	for end := time.Now().Add(d); time.Now().Before(end); {
		start := time.Now()
		require.NoError(t, pub.Publish(ctx, payload))
		out = append(out, time.Since(start))
	}
	return out
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// sampleRSS records the process's peak resident set size until ctx ends.
func sampleRSS(ctx context.Context, pid int, peak *atomic.Int64) {
	for ctx.Err() == nil {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				if b := kb << 10; b > peak.Load() {
					peak.Store(b)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// swarm is the hostile clients.
type swarm struct {
	addr string
	tls  *tls.Config

	refusedConns, refusedSubs, malformedReset, silentReset, streamBlocked atomic.Int64
}

func (s *swarm) start(ctx context.Context, wg *sync.WaitGroup) {
	for range 4 {
		wg.Go(func() { s.malformed(ctx) })
	}
	for range 4 {
		wg.Go(func() { s.silent(ctx) })
	}
	for range 3 {
		wg.Go(func() { s.subscribeNeverRead(ctx) })
	}
	for range 2 {
		wg.Go(func() { s.announce(ctx) })
	}
	wg.Go(func() { s.flood(ctx) })
}

func (s *swarm) dial(ctx context.Context) (*quic.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return quic.DialAddr(dctx, s.addr, s.tls, &quic.Config{MaxIdleTimeout: 5 * time.Second})
}

// malformed authenticates, then sends garbage, a frame over the size cap
// and an unknown flag on fresh streams, each of which the broker must end.
func (s *swarm) malformed(ctx context.Context) {
	qc, err := s.dial(ctx)
	if err != nil {
		return
	}
	defer qc.CloseWithError(0, "")
	auth := wire.AppendJSONFrame(nil, &wire.Auth{TenantID: "t1", Token: "dev"})
	huge := []byte("FLX1\x00\x01\x00\x00\x7f\xff\xff\xff") // 2 GiB payload announced
	garbage := []byte("this is not a felix frame at all, not even close")
	for i := 0; ctx.Err() == nil; i++ {
		str, err := qc.OpenStreamSync(ctx)
		if err != nil {
			return
		}
		str.Write(auth)
		str.Write([][]byte{huge, garbage}[i%2])
		str.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 4096)
		for {
			if _, err := str.Read(buf); err != nil {
				var se *quic.StreamError
				if errors.As(err, &se) || errors.Is(err, errEOF(err)) {
					s.malformedReset.Add(1)
				}
				break
			}
		}
		str.CancelWrite(0)
	}
}

func errEOF(err error) error {
	if err != nil && err.Error() == "EOF" {
		return err
	}
	return errors.New("not EOF")
}

// announce authenticates streams up to the stream limit and on each sends
// a header announcing a frame of the full 16 MiB cap, then 1 KiB of it,
// then nothing: a reader that allocated what headers announce would hold
// 60 x 16 MiB per connection.
func (s *swarm) announce(ctx context.Context) {
	qc, err := s.dial(ctx)
	if err != nil {
		return
	}
	defer qc.CloseWithError(0, "")
	auth := wire.AppendJSONFrame(nil, &wire.Auth{TenantID: "t1", Token: "dev"})
	hdr := []byte("FLX1\x00\x01\x00\x00\x01\x00\x00\x00") // JSON frame, 16 MiB announced
	for range 60 {
		str, err := qc.OpenStreamSync(ctx)
		if err != nil {
			return
		}
		str.Write(auth)
		str.Write(hdr)
		str.Write(make([]byte, 1024))
	}
	<-ctx.Done()
}

// silent opens streams and never authenticates them: the broker resets
// each after FELIX_AUTH_TIMEOUT_MS, and at FELIX_MAX_STREAMS_PER_CONN open
// ones the next open blocks.
func (s *swarm) silent(ctx context.Context) {
	qc, err := s.dial(ctx)
	if err != nil {
		return
	}
	defer qc.CloseWithError(0, "")
	for ctx.Err() == nil {
		str, err := qc.OpenStream()
		if err != nil {
			var tooMany *quic.StreamLimitReachedError
			if errors.As(err, &tooMany) {
				s.streamBlocked.Add(1)
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		str.Write([]byte{'F'}) // the stream exists for the broker only once it carries a byte
		go func() {
			str.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := str.Read(make([]byte, 256)); err != nil {
				s.silentReset.Add(1)
			}
			str.CancelWrite(0)
		}()
	}
}

// subscribeNeverRead subscribes past the per-connection limit and never
// reads an event.
func (s *swarm) subscribeNeverRead(ctx context.Context) {
	c, err := client.Dial(ctx, s.addr, client.Config{Tenant: "t1", Token: "dev", TLS: s.tls.Clone(),
		StreamReceiveWindow: 64 << 10, ConnectionReceiveWindow: 256 << 10})
	if err != nil {
		return
	}
	defer c.Close()
	for i := 0; i < 40 && ctx.Err() == nil; i++ {
		if _, err := c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{}); err != nil {
			var be *client.BrokerError
			if errors.As(err, &be) {
				s.refusedSubs.Add(1)
			}
		}
	}
	<-ctx.Done()
}

// flood dials connections as fast as it can, keeping them, until the
// broker refuses.
func (s *swarm) flood(ctx context.Context) {
	var conns []*quic.Conn
	defer func() {
		for _, c := range conns {
			c.CloseWithError(0, "")
		}
	}()
	for ctx.Err() == nil && len(conns) < 200 {
		qc, err := s.dial(ctx)
		if err != nil {
			var te *quic.TransportError
			if errors.As(err, &te) && te.ErrorCode == quic.ConnectionRefused {
				s.refusedConns.Add(1)
			}
			continue
		}
		conns = append(conns, qc)
	}
	<-ctx.Done()
}
