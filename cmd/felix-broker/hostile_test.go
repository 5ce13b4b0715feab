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

// hostileEnv is the limits the hostile-client test runs the broker with
// (each a registered knob); the swarm is sized to cross every one of them.
func hostileEnv(scale int) []string {
	return []string{
		"FELIX_MAX_CONNECTIONS=48", "FELIX_MAX_STREAMS_PER_CONN=64",
		"FELIX_MAX_SUBSCRIPTIONS_PER_CONN=" + strconv.Itoa(scale*hostileMaxSubs),
		"FELIX_SUBSCRIBER_QUEUE=128", "FELIX_AUTH_TIMEOUT_MS=500", // frames keep the default 16 MiB cap: announce() aims at it
	}
}

// hostileRSSBound is the memory the broker may reach under a swarm whose
// never-reading subscribers hold subs subscriptions: 320 MiB for the rest
// of the swarm (at the defaults its 200 flooded connections, 4,096 silent
// streams and 16 MiB announcers peaked at 180 MiB before the subscribers
// joined), plus 64 KiB per subscription: a subscription whose peer does not
// read keeps a full gather buffer (FELIX_EVENT_BATCH_MAX_BYTES, 64 KiB)
// blocked in its stream write, besides the peer's window in flight and its
// queue of references to shared buffers (docs/RELIABILITY.md, memory model).
func hostileRSSBound(subs int) int64 { return 320<<20 + int64(subs)*64<<10 }

// hostileP99Ceiling bounds the good client's ack p99 under the swarm.
const hostileP99Ceiling = 500 * time.Millisecond

// hostileMaxSubs is hostileEnv's FELIX_MAX_SUBSCRIPTIONS_PER_CONN at scale
// 1; the subscribe swarm asks for a quarter more on each connection.
const hostileMaxSubs = 100

// hostileScaleEnv scales the subscribe swarm (default 1; `make
// reliability` runs 4): scale×4 connections, each asking for
// scale×125 subscriptions with the per-connection limit at scale×100, and
// up to scale×15 s for them to get there before the good client's latency
// is measured under them.
const hostileScaleEnv = "FELIX_HOSTILE_SCALE"

func hostileScale() int {
	if v, err := strconv.Atoi(os.Getenv(hostileScaleEnv)); err == nil && v > 0 {
		return v
	}
	return 1
}

func hostileSubSwarm(addr string, tlsConf *tls.Config, scale int) *subSwarm {
	return &subSwarm{addr: addr, tls: tlsConf, conns: 4 * scale, limit: scale * hostileMaxSubs, perConn: scale * hostileMaxSubs * 5 / 4,
		parallel: 8, churnParallel: 4, churnBatch: 50, stream: "demo", feedEvery: 10 * time.Millisecond}
}

// TestHostileClientsAreContained is the reliability issue's hostile-client
// scenario on the real binary: while a well-behaved client publishes
// (acked, sequential) to a stream it follows, a swarm sends malformed and
// oversized frames, opens streams it never authenticates, floods
// handshakes past the connection limit and subscribes hundreds to
// thousands of times, past the subscription limit, without ever reading
// (subSwarm). The broker
// must enforce each limit, bound every never-read queue by its capacity,
// stay under hostileRSSBound, release everything once the swarm's
// connections close (goroutines back to idle), keep the good client's ack
// p50 within 20x of its p50 before the swarm and its p99 under
// hostileP99Ceiling, and deliver the good client every record it published.
func TestHostileClientsAreContained(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker process under a client swarm")
	}
	// With small limits the swarm crosses every one of them; with the
	// defaults it crosses none but the frame cap, and the defaults must
	// still keep the broker within the memory bound and serving.
	t.Run("limits", func(t *testing.T) { hostileRun(t, true, hostileEnv(hostileScale())...) })
	t.Run("defaults", func(t *testing.T) { hostileRun(t, false) })
}

func hostileRun(t *testing.T, limits bool, env ...string) {
	// The swarm subscribes to demo; the good client publishes to and
	// follows a stream of its own.
	bp := startBrokerProcess(t, append(env, "FELIX_STREAMS=t1/default/demo:1,t1/default/good:1")...)
	pem, err := os.ReadFile(bp.cert)
	require.NoError(t, err)
	pool, err := devtls.Pool(pem)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	good := newGoodClient(ctx, t, bp)
	var o hostileOutcome
	o.before = ackLatencies(ctx, t, good.pub, time.Second)
	o.idle = sample(t, bp)

	swarmCtx, stopSwarm := context.WithCancel(ctx)
	tlsConf := &tls.Config{RootCAs: pool, NextProtos: []string{client.ALPN}}
	o.sw = &swarm{addr: bp.addr, tls: tlsConf}
	scale := hostileScale()
	o.subs = hostileSubSwarm(bp.addr, tlsConf, scale)
	require.NoError(t, o.subs.dial(ctx))
	defer o.subs.close()
	var wg sync.WaitGroup
	started := time.Now()
	o.subs.start(swarmCtx, &wg)
	o.sw.start(swarmCtx, &wg)
	wg.Go(func() { sampleRSS(swarmCtx, bp.cmd.Process.Pid, &o.peakRSS) })
	select { // the subscribers hold what the broker lets them
	case <-o.subs.settled:
	case <-time.After(time.Duration(scale) * 15 * time.Second):
	}
	o.settled = time.Since(started)
	o.during = ackLatencies(ctx, t, good.pub, 2*time.Second)
	o.busy, o.held = sample(t, bp), brokerSubscriptions(t, bp)
	stopSwarm()
	wg.Wait()
	o.subs.close()
	stopped := time.Now()
	o.after = backToIdle(t, bp, o.idle, 15*time.Second)
	o.toIdle = time.Since(stopped)
	o.left = brokerSubscriptions(t, bp)
	o.log(t)
	o.check(t, limits)
	good.check(ctx, t, len(o.before)+len(o.during))
}

// goodClient is the well-behaved client: a publisher and a subscriber
// that reads everything, on one stream.
type goodClient struct {
	pub            *client.Publisher
	received, gaps atomic.Int64
}

func newGoodClient(ctx context.Context, t *testing.T, bp *brokerProcess) *goodClient {
	c := bp.dial(t)
	g := &goodClient{}
	var err error
	g.pub, err = c.NewPublisher(ctx, "default", "good")
	require.NoError(t, err)
	follow, err := c.Subscribe(ctx, "default", "good", client.SubscribeOptions{})
	require.NoError(t, err)
	go func() { // ends when the client is closed at cleanup
		for {
			ev, err := follow.Next(ctx)
			switch {
			case err != nil:
				return
			case ev.Dropped > 0:
				g.gaps.Add(1)
			default:
				g.received.Add(1)
			}
		}
	}()
	return g
}

// check publishes once more and requires that the subscriber received
// every one of the published acked records, with no gap.
func (g *goodClient) check(ctx context.Context, t *testing.T, published int) {
	require.NoError(t, g.pub.Publish(ctx, []byte("still serving")))
	sent := int64(published + 1)
	require.Eventually(t, func() bool { return g.received.Load() == sent }, 10*time.Second, time.Millisecond,
		"the good client's subscriber received %d of its %d acked publishes", g.received.Load(), sent)
	require.Zero(t, g.gaps.Load(), "the good client's subscriber was reported a gap")
}

// hostileOutcome is what one hostile run measured.
type hostileOutcome struct {
	before, during    []time.Duration // the good client's ack latencies
	idle, busy, after soakSample      // the broker before, under and after the swarm
	held, left        subscriptionStats
	sw                *swarm
	subs              *subSwarm
	peakRSS           atomic.Int64
	settled, toIdle   time.Duration
}

func (o *hostileOutcome) log(t *testing.T) {
	p50b, p50d := quantile(o.before, 0.5), quantile(o.during, 0.5)
	p99b, p99d := quantile(o.before, 0.99), quantile(o.during, 0.99)
	t.Logf("good client ack p50/p99 before %v/%v, during the swarm %v/%v (x%.1f/x%.1f); broker peak RSS %d MiB (bound %d MiB)",
		p50b, p99b, p50d, p99d, float64(p50d)/float64(p50b), float64(p99d)/float64(p99b), o.peakRSS.Load()>>20, hostileRSSBound(o.held.count)>>20)
	t.Logf("swarm: %d handshakes refused, %d malformed streams reset, %d silent streams reset, %d streams blocked at the limit",
		o.sw.refusedConns.Load(), o.sw.malformedReset.Load(), o.sw.silentReset.Load(), o.sw.streamBlocked.Load())
	t.Logf("subscribers: %v; settled after %v", o.subs, o.settled.Round(time.Millisecond))
	t.Logf("broker subscriptions during: %d, queue depth max %d (capacity %d), %d events dropped by their queues",
		o.held.count, o.held.maxDepth, o.held.capacity, o.held.dropped)
	t.Logf("broker idle before: %v", o.idle)
	t.Logf("broker during:      %v", o.busy)
	t.Logf("broker after:       %v (%v after the swarm stopped); %d subscriptions left (the good client's: 1)",
		o.after, o.toIdle.Round(time.Millisecond), o.left.count)
}

func (o *hostileOutcome) check(t *testing.T, limits bool) {
	sw, subs := o.sw, o.subs
	require.Positive(t, sw.malformedReset.Load(), "malformed frames did not end their streams")
	if limits {
		require.Positive(t, sw.refusedConns.Load(), "FELIX_MAX_CONNECTIONS refused nothing")
		require.Positive(t, subs.refused.Load(), "FELIX_MAX_SUBSCRIPTIONS_PER_CONN refused nothing")
		require.Equal(t, "limit_exceeded: max subscriptions per connection exceeded", subs.refusal.Load().Message)
		require.ErrorIs(t, subs.refusal.Load(), client.ErrLimitExceeded, "coded limit_exceeded")
		require.Equal(t, int64(subs.conns*subs.limit), subs.held.Load(), "each swarm connection holds the limit")
		require.Positive(t, sw.silentReset.Load(), "FELIX_AUTH_TIMEOUT_MS reset no silent stream")
		require.Positive(t, sw.streamBlocked.Load(), "FELIX_MAX_STREAMS_PER_CONN blocked no stream")
	}
	require.GreaterOrEqual(t, subs.held.Load()+subs.churned.Load(), int64(subs.conns*subs.limit), "the swarm subscribed too few times")
	require.LessOrEqual(t, o.held.maxDepth, o.held.capacity, "a never-read subscription queued past its capacity")
	require.Less(t, o.peakRSS.Load(), hostileRSSBound(o.held.count), "broker peak RSS, MiB: %d", o.peakRSS.Load()>>20)
	// The p50 holds within the factor; the p99 only under a ceiling: on
	// two cores shared with other builds (load 15+) the good client's p99
	// under the previous, smaller swarm already reached x131
	// (docs/RELIABILITY.md).
	p50b, p50d := quantile(o.before, 0.5), quantile(o.during, 0.5)
	require.Less(t, float64(p50d), 20*float64(p50b)+float64(20*time.Millisecond), "the good client's p50 under the swarm")
	require.Less(t, quantile(o.during, 0.99), hostileP99Ceiling, "the good client's p99 under the swarm")
	require.Equal(t, 1, o.left.count, "subscriptions of closed connections are still registered (1 is the good client's)")
	// At most idle's: fewer is not a leak (CI once saw 19 after 20 at
	// idle, a goroutine alive at the idle sample having ended since, e.g.
	// an admin keep-alive connection of this test's polling).
	require.LessOrEqual(t, o.after.goroutines, o.idle.goroutines, "broker goroutines did not return to idle after the swarm")
	require.LessOrEqual(t, o.after.buffers, int64(2*1024), "pooled buffers outstanding beyond what the two streams' rings hold")
}

// backToIdle waits until the broker's goroutines and fds are back to
// idle's (or below) and no event is queued, and returns the sample. (Pooled buffers
// need not be: the streams' rings keep their last events.)
func backToIdle(t *testing.T, bp *brokerProcess, idle soakSample, within time.Duration) soakSample {
	var s soakSample
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if s = sample(t, bp); s.goroutines <= idle.goroutines && s.fds <= idle.fds && s.queueDepth == 0 {
			break
		}
	}
	return s
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

	refusedConns, malformedReset, silentReset, streamBlocked atomic.Int64
}

func (s *swarm) start(ctx context.Context, wg *sync.WaitGroup) {
	for range 4 {
		wg.Go(func() { s.malformed(ctx) })
	}
	for range 4 {
		wg.Go(func() { s.silent(ctx) })
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
// each after FELIX_AUTH_TIMEOUT_MS, at FELIX_MAX_STREAMS_PER_CONN open ones
// the next open blocks, and the connection, having authenticated nothing,
// is closed at the auth timeout too; silent dials again.
func (s *swarm) silent(ctx context.Context) {
	for ctx.Err() == nil {
		qc, err := s.dial(ctx)
		if err != nil {
			return
		}
		s.silentOn(ctx, qc)
		qc.CloseWithError(0, "")
	}
}

func (s *swarm) silentOn(ctx context.Context, qc *quic.Conn) {
	for ctx.Err() == nil && qc.Context().Err() == nil {
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

// flood dials connections as fast as it can, authenticating a stream on
// each (an unauthenticated one would only hold its slot until a handshake
// evicts it) and keeping them, until the broker refuses.
func (s *swarm) flood(ctx context.Context) {
	var conns []*quic.Conn
	defer func() {
		for _, c := range conns {
			c.CloseWithError(0, "")
		}
	}()
	auth := wire.AppendJSONFrame(nil, &wire.Auth{TenantID: "t1", Token: "dev"})
	for ctx.Err() == nil && len(conns) < 200 {
		qc, err := s.dial(ctx)
		if err != nil {
			var te *quic.TransportError
			if errors.As(err, &te) && te.ErrorCode == quic.ConnectionRefused {
				s.refusedConns.Add(1)
			}
			continue
		}
		if str, err := qc.OpenStreamSync(ctx); err == nil {
			str.Write(auth)
			str.Read(make([]byte, 256)) // auth ok: the connection holds its slot
		}
		conns = append(conns, qc)
	}
	<-ctx.Done()
}
