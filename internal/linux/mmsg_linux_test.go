//go:build linux

package linux

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMmsgReadsSeveralDatagrams: one Recv returns every queued datagram
// (up to the slots asked for), each with its length, flags (MSG_TRUNC when
// the buffer was short) and source address, IPv4 and IPv6; an empty queue
// is EAGAIN, never (0, nil).
func TestMmsgReadsSeveralDatagrams(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			host := "127.0.0.1"
			if network == "udp6" {
				host = "::1"
			}
			rx, err := net.ListenUDP(network, &net.UDPAddr{IP: net.ParseIP(host)})
			if err != nil {
				t.Skipf("no %s loopback: %v", network, err)
			}
			defer rx.Close()
			tx, err := net.DialUDP(network, nil, rx.LocalAddr().(*net.UDPAddr))
			require.NoError(t, err)
			defer tx.Close()
			for _, n := range []int{10, 20, 30} {
				_, err := tx.Write(make([]byte, n))
				require.NoError(t, err)
			}
			raw, err := rx.SyscallConn()
			require.NoError(t, err)
			m := NewMmsg(4)
			bufs := [][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 25), make([]byte, 64)}
			for i, b := range bufs {
				m.Set(i, b, nil)
			}
			var got int
			require.NoError(t, raw.Control(func(fd uintptr) { got, err = m.Recv(fd, m.Len()) }))
			require.NoError(t, err)
			require.Equal(t, 3, got)
			want := netip.MustParseAddrPort(tx.LocalAddr().String())
			for i, size := range []int{10, 20, 30} {
				n, _, flags, from, _ := m.Got(i)
				require.Equal(t, want, from)
				if i == 2 {
					require.Equal(t, 25, n, "truncated to the buffer")
					require.NotZero(t, flags&0x20, "MSG_TRUNC")
					continue
				}
				require.Equal(t, size, n)
			}
			m.Set(0, bufs[0], nil)
			require.NoError(t, raw.Control(func(fd uintptr) { got, err = m.Recv(fd, 1) }))
			require.True(t, IsEAGAIN(err), "empty queue: %v", err)
			require.Zero(t, got)
		})
	}
}
