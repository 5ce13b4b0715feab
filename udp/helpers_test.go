package udp_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"hash"
	"hash/crc32"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"

	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/udp"
)

// The fast path of quic-go needs every method of OOBCapablePacketConn, and
// reads go through our code only with ReadBatch (docs/design.md, "Transport").
var (
	_ quic.OOBCapablePacketConn = (*udp.Conn)(nil)
	_ interface {
		ReadBatch(ms []ipv4.Message, flags int) (int, error)
	} = (*udp.Conn)(nil)
)

const alpn = "felix"

func tlsPair(t testing.TB) (server, client *tls.Config) {
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	pool, err := devtls.Pool(cert.PEM)
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{cert.TLS}, NextProtos: []string{alpn}},
		&tls.Config{RootCAs: pool, NextProtos: []string{alpn}, ServerName: "127.0.0.1"}
}

type transferResult struct {
	elapsed   time.Duration
	serverGSO bool
	clientGSO bool
	server    udp.ConnSnapshot
	client    udp.ConnSnapshot
}

// transfer sends size bytes from a client on cpc to a server on spc over
// one QUIC stream and checks they arrive intact. Both conns stay open: the
// caller owns them.
// newChecksum is CRC-32C: hardware-assisted, so verifying every byte costs
// the benchmark little. SHA-256 here took ~22% of the transfer's CPU and
// the chunk fill another ~15%, which diluted the difference between conns.
func newChecksum() hash.Hash32 { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) }

func transfer(t testing.TB, spc, cpc net.PacketConn, size int) transferResult {
	t.Helper()
	stls, ctls := tlsPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	saddr := spc.LocalAddr()
	mtu := udp.MTUPolicy(runtime.GOOS, saddr, udp.MTUKnobs{})
	conf := &quic.Config{
		MaxStreamReceiveWindow:     16 << 20,
		MaxConnectionReceiveWindow: 24 << 20,
		Tracer:                     udp.StatsTracer,
	}
	mtu.Apply(conf)

	sstats := udp.NewConnStats(mtu.InitialPacketSize)
	str := &quic.Transport{Conn: spc, ConnContext: func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
		return udp.WithConnStats(ctx, sstats), nil
	}}
	defer str.Close()
	ln, err := str.Listen(stls, conf)
	require.NoError(t, err)
	defer ln.Close()

	type recv struct {
		sum [4]byte
		n   int64
		gso bool
		err error
	}
	got := make(chan recv, 1)
	go func() {
		var r recv
		sent := false
		defer func() {
			if !sent {
				got <- r
			}
		}()
		qc, err := ln.Accept(ctx)
		if r.err = err; err != nil {
			return
		}
		defer qc.CloseWithError(0, "")
		st, err := qc.AcceptStream(ctx)
		if r.err = err; err != nil {
			return
		}
		h := newChecksum()
		r.n, r.err = io.Copy(h, st)
		copy(r.sum[:], h.Sum(nil))
		r.gso = qc.ConnectionState().GSO
		// Tell the client everything arrived, then let it close first.
		_, _ = st.Write([]byte{1})
		_ = st.Close()
		sent = true
		got <- r
		select {
		case <-qc.Context().Done():
		case <-ctx.Done():
		}
	}()

	cstats := udp.NewConnStats(mtu.InitialPacketSize)
	ctr := &quic.Transport{Conn: cpc}
	defer ctr.Close()
	start := time.Now()
	qc, err := ctr.Dial(udp.WithConnStats(ctx, cstats), saddr, ctls, conf)
	require.NoError(t, err)
	defer qc.CloseWithError(0, "")
	st, err := qc.OpenStreamSync(ctx)
	require.NoError(t, err)
	h := newChecksum()
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	for sent := 0; sent < size; sent += len(chunk) {
		// Each chunk is stamped with its index, so a lost, repeated or
		// reordered chunk changes the checksum.
		binary.LittleEndian.PutUint64(chunk, uint64(sent/len(chunk)))
		n := min(len(chunk), size-sent)
		h.Write(chunk[:n])
		_, err := st.Write(chunk[:n])
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	_, err = io.ReadFull(st, make([]byte, 1))
	require.NoError(t, err)
	elapsed := time.Since(start)
	r := <-got
	require.NoError(t, r.err)
	require.EqualValues(t, size, r.n)
	require.Equal(t, h.Sum(nil), r.sum[:], "payload corrupted")
	return transferResult{
		elapsed: elapsed, serverGSO: r.gso, clientGSO: qc.ConnectionState().GSO,
		server: sstats.Snapshot(), client: cstats.Snapshot(),
	}
}
