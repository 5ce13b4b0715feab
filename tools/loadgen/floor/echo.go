package floor

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/udp"
	"github.com/felixmq/felix/wire"
)

// Request is the frame an acked publish of payloads sends (a binary acked
// batch to a stream named like a benchmark's), and Reply the ack the
// broker answers it with (offset and shard): the bytes the bare round trip
// carries each way.
func Request(payloads ...[]byte) []byte {
	b, err := wire.AppendAckedPublish(nil, &wire.AckedPublish{RequestID: 1 << 40, Mode: wire.AckPerBatch,
		PublishBatch: wire.PublishBatch{TenantID: "t1", Namespace: "floor", Stream: "ephemeral", Payloads: payloads}})
	if err != nil {
		panic("floor: " + err.Error())
	}
	return b
}

// Reply is the broker's ack of Request.
func Reply() []byte {
	b, err := wire.AppendPublishAckFrame(nil, wire.PublishAck{Status: wire.AckOK, RequestID: 1 << 40,
		Offset: 1 << 30, HasOffset: true, Shard: 0, HasShard: true})
	if err != nil {
		panic("floor: " + err.Error())
	}
	return b
}

// ServeEcho is the bare server: on pc, with the broker's TLS and QUIC
// configuration (its per-connection tracer included), it answers every
// frame on every stream with Reply, written by the goroutine that read the
// frame. With rs (nil: none), that goroutine first appends the frame's
// payload to rs's file and fdatasyncs (RawSync.Write): the floor of a
// durable on_commit publish, one round trip and one sync of a record of
// the same size, with no hand-off. It returns when ctx ends.
func ServeEcho(ctx context.Context, pc net.PacketConn, cert tls.Certificate, rs *RawSync) error {
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{broker.ALPN}}
	qconf := broker.QUICConfig(broker.Config{}, pc.LocalAddr())
	mtu := udp.MTUPolicy(runtime.GOOS, pc.LocalAddr(), udp.MTUKnobs{})
	tr := &quic.Transport{Conn: pc, ConnContext: func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
		return udp.WithConnStats(ctx, udp.NewConnStats(mtu.InitialPacketSize)), nil
	}}
	defer tr.Close()
	ln, err := tr.Listen(tlsConf, qconf)
	if err != nil {
		return fmt.Errorf("floor: listen: %w", err)
	}
	defer ln.Close()
	reply := Reply()
	for {
		qc, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("floor: accept: %w", err)
		}
		go func() {
			for {
				str, err := qc.AcceptStream(ctx)
				if err != nil {
					return
				}
				go echo(str, reply, rs)
			}
		}()
	}
}

// echo answers each frame on str with reply until the stream ends, each
// after appending and syncing its payload when rs is not nil.
func echo(str *quic.Stream, reply []byte, rs *RawSync) {
	defer str.Close()
	r := bufio.NewReaderSize(str, 64<<10)
	var head [wire.HeaderLen]byte
	body := make([]byte, 0, 64<<10)
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		h, err := wire.ParseHeader(head[:], 0)
		if err != nil {
			str.CancelRead(1)
			return
		}
		body = slices.Grow(body[:0], int(h.Length))[:h.Length]
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if rs != nil {
			if _, err := rs.Write(body); err != nil {
				str.CancelRead(1)
				return
			}
		}
		if _, err := str.Write(reply); err != nil {
			return
		}
	}
}

// Echo is the bare client: one connection to a ServeEcho, with the
// client's QUIC configuration, and one stream that carries one request at
// a time.
type Echo struct {
	tr    *quic.Transport
	pc    *udp.Conn
	qc    *quic.Conn
	str   *quic.Stream
	reply []byte
}

// DialEcho connects to the echo server at addr whose certificate has the
// given SHA-256 fingerprint.
func DialEcho(ctx context.Context, addr, fingerprint string) (*Echo, error) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	pc, err := udp.Listen("udp", "127.0.0.1:0", udp.Config{})
	if err != nil {
		return nil, err
	}
	tlsConf := devtls.PinnedConfig(fingerprint)
	tlsConf.NextProtos = []string{client.ALPN}
	mtu := udp.MTUPolicy(runtime.GOOS, raddr, udp.MTUKnobs{})
	tr := &quic.Transport{Conn: pc}
	qc, err := tr.Dial(udp.WithConnStats(ctx, udp.NewConnStats(mtu.InitialPacketSize)), raddr, tlsConf,
		client.QUICConfig(client.Config{}, mtu))
	if err != nil {
		tr.Close()
		pc.Close()
		return nil, fmt.Errorf("floor: dial %s: %w", addr, err)
	}
	str, err := qc.OpenStreamSync(ctx)
	if err != nil {
		qc.CloseWithError(0, "")
		tr.Close()
		pc.Close()
		return nil, err
	}
	return &Echo{tr: tr, pc: pc, qc: qc, str: str, reply: make([]byte, len(Reply()))}, nil
}

// RoundTrip sends req and waits for the whole reply; it returns how long
// that took.
func (e *Echo) RoundTrip(req []byte) (time.Duration, error) {
	t0 := time.Now()
	if _, err := e.str.Write(req); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(e.str, e.reply); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// Packets is what the connection sent and received so far.
func (e *Echo) Packets() (sent, received uint64) {
	st := e.qc.ConnectionStats()
	return st.PacketsSent, st.PacketsReceived
}

// Close ends the connection and frees the socket.
func (e *Echo) Close() error {
	e.str.Close()
	err := e.qc.CloseWithError(0, "")
	e.tr.Close()
	e.pc.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
