//go:build linux

package udp_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"

	"github.com/felixmq/felix/internal/linux"
	"github.com/felixmq/felix/udp"
)

// segmentCmsgs is what quic-go attaches to a GSO write: UDP_SEGMENT, then
// IP_TOS carrying the ECN bits (1 byte for IPv4, quic-go sys_conn_oob.go).
func segmentCmsgs(seg uint16, ecn byte) []byte {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], seg)
	oob := linux.AppendCmsg(nil, linux.SOL_UDP, linux.UDP_SEGMENT, b[:])
	return linux.AppendCmsg(oob, linux.IPPROTO_IP, linux.IP_TOS, []byte{ecn})
}

// gsoPair opens a receiving Conn on laddr with the socket options quic-go's
// newConn turns on through SyscallConn (IP_RECVTOS, and IP_PKTINFO if
// pktinfo), and a stock sender on 127.0.0.1; both close with t.
func gsoPair(t testing.TB, laddr string, gro, pktinfo bool) (*udp.Conn, *net.UDPConn) {
	rx, err := udp.Listen("udp4", laddr, udp.Config{DisableGRO: !gro})
	require.NoError(t, err)
	t.Cleanup(func() { rx.Close() })
	raw, err := rx.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, raw.Control(func(fd uintptr) {
		require.NoError(t, linux.SetsockoptInt(fd, linux.IPPROTO_IP, linux.IP_RECVTOS, 1))
		if pktinfo {
			require.NoError(t, linux.SetsockoptInt(fd, linux.IPPROTO_IP, linux.IP_PKTINFO, 1))
		}
	}))
	tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { tx.Close() })
	return rx, tx
}

type pieceInfo struct {
	tos     int // -1: none
	pktinfo bool
	gro     bool
}

func parsePiece(t *testing.T, oob []byte) pieceInfo {
	p := pieceInfo{tos: -1}
	for len(oob) > 0 {
		level, typ, data, rest, err := linux.NextCmsg(oob)
		require.NoError(t, err)
		switch {
		case level == linux.IPPROTO_IP && typ == linux.IP_TOS:
			require.Len(t, data, 1, "quic-go insists on a 1-byte IP_TOS")
			p.tos = int(data[0])
		case level == linux.IPPROTO_IP && typ == linux.IP_PKTINFO:
			require.Len(t, data, 12, "struct in_pktinfo")
			p.pktinfo = true
		case level == linux.SOL_UDP && typ == linux.UDP_GRO:
			p.gro = true
		}
		oob = rest
	}
	return p
}

// TestGROSplitsGSOSends: a GSO send of 10 full segments and a short tail
// reaches quic-go as 11 packets of the right sizes, in order, each with the
// sender's ECN mark and the packet info (the socket is bound to 0.0.0.0, as
// when quic-go needs PKTINFO), handed out 4 at a time so that leftovers
// carry over between calls. With GRO off the kernel segments instead and
// the same holds.
func TestGROSplitsGSOSends(t *testing.T) {
	const seg, full, tail = 1200, 10, 700
	for _, gro := range []bool{true, false} {
		for _, ecn := range []byte{1, 2, 3} { // ECT(1), ECT(0), CE
			t.Run(fmt.Sprintf("gro=%v/ecn=%d", gro, ecn), func(t *testing.T) {
				rx, tx := gsoPair(t, "0.0.0.0:0", gro, true)

				payload := make([]byte, full*seg+tail)
				for i := range payload {
					payload[i] = byte(i / seg)
				}
				dst := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: rx.LocalAddr().(*net.UDPAddr).Port}
				_, _, err := tx.WriteMsgUDP(payload, segmentCmsgs(seg, ecn), dst)
				require.NoError(t, err)

				var pieces [][]byte
				for len(pieces) < full+1 {
					ms := messages(4)
					n, err := rx.ReadBatch(ms, 0)
					require.NoError(t, err)
					require.Positive(t, n)
					for _, m := range ms[:n] {
						require.LessOrEqual(t, m.NN, 128)
						p := parsePiece(t, m.OOB[:m.NN])
						require.Equal(t, int(ecn), p.tos&0x3, "ECN mark lost in the split")
						require.True(t, p.pktinfo, "PKTINFO not carried")
						require.False(t, p.gro, "UDP_GRO is not a per-packet message")
						require.Equal(t, tx.LocalAddr().String(), m.Addr.(*net.UDPAddr).String())
						pieces = append(pieces, append([]byte(nil), m.Buffers[0][:m.N]...))
					}
				}
				require.Len(t, pieces, full+1)
				for i, p := range pieces {
					want := seg
					if i == full {
						want = tail
					}
					require.Len(t, p, want, "piece %d", i)
					require.Equal(t, byte(i), p[0], "piece %d out of order", i)
					require.Equal(t, byte(i), p[len(p)-1])
				}
				s := rx.Stats()
				require.EqualValues(t, full+1, s.PacketsIn)
				if gro {
					require.EqualValues(t, 1, s.DatagramsIn, "loopback delivers a GSO send to a GRO socket whole")
					require.EqualValues(t, 1, s.GROBatches)
				} else {
					require.EqualValues(t, full+1, s.DatagramsIn)
					require.Zero(t, s.GROBatches)
				}
			})
		}
	}
}

// TestGSOSplitWhenDisabled: with GSO off a UDP_SEGMENT write leaves as one
// datagram per segment, each keeping the ECN mark, and no GSO send counts.
func TestGSOSplitWhenDisabled(t *testing.T) {
	c, err := udp.Listen("udp4", "127.0.0.1:0", udp.Config{DisableGSO: true, DisableGRO: true})
	require.NoError(t, err)
	defer c.Close()
	raw, err := c.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, raw.Control(func(fd uintptr) {
		require.NoError(t, linux.SetsockoptInt(fd, linux.IPPROTO_IP, linux.IP_RECVTOS, 1))
	}))
	self := c.LocalAddr().(*net.UDPAddr)
	payload := append(bytes.Repeat([]byte{'a'}, 1200), bytes.Repeat([]byte{'b'}, 1000)...)
	n, _, err := c.WriteMsgUDP(payload, segmentCmsgs(1200, 2), self)
	require.NoError(t, err)
	require.Equal(t, len(payload), n)
	s := c.Stats()
	require.False(t, s.GSO)
	require.EqualValues(t, 1, s.GSOSplit)
	require.Zero(t, s.GSOSends)
	require.EqualValues(t, 2, s.SendCalls)
	require.EqualValues(t, 2, s.PacketsOut)
	var got []int
	for len(got) < 2 {
		ms := messages(8)
		n, err := c.ReadBatch(ms, 0)
		require.NoError(t, err)
		for _, m := range ms[:n] {
			require.Equal(t, 2, parsePiece(t, m.OOB[:m.NN]).tos&3)
			got = append(got, m.N)
		}
	}
	require.Equal(t, []int{1200, 1000}, got)
}

// TestReadBatchSourceAddresses: datagrams from several senders, read in
// one recvmmsg, each carry their own sender's address, in both read modes.
func TestReadBatchSourceAddresses(t *testing.T) {
	for _, gro := range []bool{true, false} {
		t.Run(fmt.Sprintf("gro=%v", gro), func(t *testing.T) {
			rx, err := udp.Listen("udp4", "127.0.0.1:0", udp.Config{DisableGRO: !gro})
			require.NoError(t, err)
			defer rx.Close()
			var txs []*net.UDPConn
			for range 3 {
				tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
				require.NoError(t, err)
				defer tx.Close()
				txs = append(txs, tx)
			}
			const rounds = 4
			for r := range rounds {
				for i, tx := range txs {
					_, err := tx.Write([]byte{byte(r), byte(i)})
					require.NoError(t, err)
				}
			}
			ms := make([]ipv4.Message, 5)
			for i := range ms {
				ms[i].Buffers = [][]byte{make([]byte, 1452)}
				ms[i].OOB = make([]byte, 128)
			}
			for got := 0; got < rounds*len(txs); {
				n, err := rx.ReadBatch(ms, 0)
				require.NoError(t, err)
				for _, m := range ms[:n] {
					require.Equal(t, 2, m.N)
					from := txs[m.Buffers[0][1]].LocalAddr().String()
					require.Equal(t, from, m.Addr.(*net.UDPAddr).String())
				}
				got += n
			}
		})
	}
}
