package broker_test

// The honest baseline for broker overhead (docs/design.md, "Measuring"): a minimal two-hop
// relay on the same transport as the broker and the client — quic-go over a
// plain *net.UDPConn, TLS 1.3 with a devtls self-signed certificate, ALPN
// "felix", the same receive windows — and no broker logic at all.
//
// publisher → relay → subscriber. The publisher writes chunks on one
// bidirectional stream: a u32 length, then 64 messages of u32 length + 4 KiB.
// The relay reads each whole chunk into one buffer and writes it to a
// unidirectional stream it opened to the subscriber (store-and-forward, one
// copy), as the broker opens one event stream per subscription.

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/devtls"
)

const (
	relayALPN         = "felix"
	relayStreamWindow = 16 << 20 // broker.Config and client.Config defaults
	relayRoleSub      = 'S'
	relayRolePub      = 'P'
)

// relayServerQUIC mirrors broker.(*Broker).quicConfig with default Config.
func relayServerQUIC() *quic.Config {
	return &quic.Config{
		MaxIdleTimeout:                 30 * time.Second,
		KeepAlivePeriod:                10 * time.Second,
		InitialStreamReceiveWindow:     relayStreamWindow,
		MaxStreamReceiveWindow:         relayStreamWindow,
		InitialConnectionReceiveWindow: benchQUICConn,
		MaxConnectionReceiveWindow:     benchQUICConn,
		MaxIncomingStreams:             1024,
		MaxIncomingUniStreams:          1024,
	}
}

// relayClientQUIC mirrors client.Dial with default Config.
func relayClientQUIC() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           10 * time.Second,
		MaxIdleTimeout:                 30 * time.Second,
		KeepAlivePeriod:                10 * time.Second,
		InitialStreamReceiveWindow:     relayStreamWindow,
		MaxStreamReceiveWindow:         relayStreamWindow,
		InitialConnectionReceiveWindow: benchQUICConn,
		MaxConnectionReceiveWindow:     benchQUICConn,
		MaxIncomingUniStreams:          4096,
	}
}

// benchRelay accepts one subscriber and one publisher and forwards the
// publisher's chunks to the subscriber.
type benchRelay struct {
	pc        net.PacketConn
	tr        *quic.Transport
	ln        *quic.Listener
	clientTLS *tls.Config
	subOut    chan *quic.SendStream // relay side of the subscriber's stream
	subIn     *quic.ReceiveStream   // subscriber side, set by dial
	errc      chan error
	ctx       context.Context
	cancel    context.CancelFunc
	mu        sync.Mutex
	conns     []*quic.Conn // both ends of both connections, for loss counts
}

func (r *benchRelay) track(qc *quic.Conn) {
	r.mu.Lock()
	r.conns = append(r.conns, qc)
	r.mu.Unlock()
}

// lost sums the packets quic-go declared lost on both ends of both hops.
func (r *benchRelay) lost() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n uint64
	for _, qc := range r.conns {
		n += qc.ConnectionStats().PacketsLost
	}
	return n
}

func startRelay(b *testing.B) *benchRelay {
	b.Helper()
	cert, err := devtls.SelfSigned()
	require.NoError(b, err)
	pool, err := devtls.Pool(cert.PEM)
	require.NoError(b, err)
	pc := benchListen(b, "127.0.0.1:0")
	tr := &quic.Transport{Conn: pc}
	ln, err := tr.Listen(&tls.Config{Certificates: []tls.Certificate{cert.TLS}, NextProtos: []string{relayALPN}}, relayServerQUIC())
	require.NoError(b, err)
	r := &benchRelay{pc: pc, tr: tr, ln: ln, clientTLS: &tls.Config{RootCAs: pool, NextProtos: []string{relayALPN}},
		subOut: make(chan *quic.SendStream, 1), errc: make(chan error, 2)}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go r.accept()
	b.Cleanup(func() {
		r.cancel()
		ln.Close()
		tr.Close()
		pc.Close()
	})
	return r
}

func (r *benchRelay) accept() {
	for {
		qc, err := r.ln.Accept(r.ctx)
		if err != nil {
			return
		}
		go func() {
			if err := r.handle(qc); err != nil && r.ctx.Err() == nil {
				r.errc <- err
			}
		}()
	}
}

// handle reads the role byte on the first stream: a subscriber gets a
// unidirectional stream to receive on, a publisher's stream is forwarded.
func (r *benchRelay) handle(qc *quic.Conn) error {
	r.track(qc)
	str, err := qc.AcceptStream(r.ctx)
	if err != nil {
		return err
	}
	var role [1]byte
	if _, err := io.ReadFull(str, role[:]); err != nil {
		return err
	}
	switch role[0] {
	case relayRoleSub:
		out, err := qc.OpenUniStreamSync(r.ctx)
		if err != nil {
			return err
		}
		if _, err := out.Write(role[:]); err != nil {
			return err
		}
		r.subOut <- out
		return nil
	case relayRolePub:
		select {
		case out := <-r.subOut:
			return relayForward(str, out)
		case <-r.ctx.Done():
			return nil
		}
	}
	return fmt.Errorf("relay: unknown role %q", role[0])
}

// relayForward copies whole chunks from in to out until in ends.
func relayForward(in io.Reader, out io.Writer) error {
	buf := make([]byte, 4+benchBatch*(4+benchMsgSize))
	for {
		if _, err := io.ReadFull(in, buf[:4]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := int(binary.BigEndian.Uint32(buf))
		if n > len(buf)-4 {
			return fmt.Errorf("relay: chunk of %d bytes", n)
		}
		if _, err := io.ReadFull(in, buf[4:4+n]); err != nil {
			return err
		}
		if _, err := out.Write(buf[:4+n]); err != nil {
			return err
		}
	}
}

// dial connects a relay client (own UDP socket and transport, as client.Dial)
// and announces its role on a new bidirectional stream.
func (r *benchRelay) dial(b *testing.B, role byte) *quic.Stream {
	b.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	pc := benchListen(b, "0.0.0.0:0")
	tr := &quic.Transport{Conn: pc}
	qc, err := tr.Dial(ctx, r.pc.LocalAddr(), r.clientTLS, relayClientQUIC())
	require.NoError(b, err)
	r.track(qc)
	b.Cleanup(func() {
		qc.CloseWithError(0, "done")
		tr.Close()
		pc.Close()
	})
	str, err := qc.OpenStreamSync(ctx)
	require.NoError(b, err)
	_, err = str.Write([]byte{role})
	require.NoError(b, err)
	if role == relayRoleSub {
		in, err := qc.AcceptUniStream(ctx)
		require.NoError(b, err)
		var hello [1]byte
		_, err = io.ReadFull(in, hello[:])
		require.NoError(b, err)
		r.subIn = in
	}
	return str
}

// relayChunk is one 64 × 4 KiB chunk as the publisher writes it.
func relayChunk() []byte {
	body := 4 + benchBatch*(4+benchMsgSize)
	chunk := make([]byte, body)
	binary.BigEndian.PutUint32(chunk, uint32(body-4))
	for i := range benchBatch {
		at := 4 + i*(4+benchMsgSize)
		binary.BigEndian.PutUint32(chunk[at:], benchMsgSize)
		for j := range benchMsgSize {
			chunk[at+4+j] = byte(j)
		}
	}
	return chunk
}

// relayRead reads chunks until msgs messages arrived and returns the
// payload bytes and the time of the last one.
func relayRead(in io.Reader, msgs int) (uint64, time.Time, error) {
	buf := make([]byte, 4+benchBatch*(4+benchMsgSize))
	var bytes uint64
	for seen := 0; seen < msgs; {
		if _, err := io.ReadFull(in, buf[:4]); err != nil {
			return bytes, time.Time{}, err
		}
		n := int(binary.BigEndian.Uint32(buf))
		if n > len(buf)-4 {
			return bytes, time.Time{}, fmt.Errorf("relay subscriber: chunk of %d bytes", n)
		}
		chunk := buf[4 : 4+n]
		if _, err := io.ReadFull(in, chunk); err != nil {
			return bytes, time.Time{}, err
		}
		for at := 0; at+4 <= len(chunk); seen++ {
			m := int(binary.BigEndian.Uint32(chunk[at:]))
			bytes += uint64(m)
			at += 4 + m
		}
	}
	return bytes, time.Now(), nil
}

// BenchmarkRelayBaseline4KiBx64 moves the same fixed volume as
// BenchmarkThroughput4KiBx64 through the bare relay; MB/s is payload bytes
// delivered / (last delivery − first write).
func BenchmarkRelayBaseline4KiBx64(b *testing.B) {
	vol := benchVolume(b)
	msgs := vol / benchMsgSize
	r := startRelay(b)
	r.dial(b, relayRoleSub)
	pub := r.dial(b, relayRolePub)
	chunk := relayChunk()
	type result struct {
		bytes uint64
		last  time.Time
		err   error
	}
	done := make(chan result, 1)
	in := r.subIn
	go func() {
		n, last, err := relayRead(in, msgs)
		done <- result{n, last, err}
	}()
	b.ResetTimer()
	cpu0, start := processCPU(), time.Now()
	for sent := 0; sent < msgs; sent += benchBatch {
		_, err := pub.Write(chunk)
		require.NoError(b, err)
	}
	var res result
	select {
	case res = <-done:
	case err := <-r.errc:
		b.Fatalf("relay: %v", err)
	case <-time.After(benchDrainMax):
		b.Fatalf("relay subscriber still reading after %v", benchDrainMax)
	}
	cpu := processCPU() - cpu0
	b.StopTimer()
	require.NoError(b, res.err)
	require.Equal(b, uint64(msgs)*benchMsgSize, res.bytes)
	reportRate(b, res.bytes, msgs, res.last.Sub(start), cpu)
	b.ReportMetric(float64(r.lost()), "lost_pkts")
}
