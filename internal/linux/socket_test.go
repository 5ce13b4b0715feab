package linux

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSocketOptions: GRO can be enabled, the UDP_SEGMENT probe answers, and
// buffers read back at least what was set (Linux doubles it).
func TestSocketOptions(t *testing.T) {
	if !Supported {
		t.Skip("socket options are Linux-only")
	}
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer uc.Close()
	raw, err := uc.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, raw.Control(func(fd uintptr) {
		require.NoError(t, EnableUDPGRO(fd))
		v, err := GetsockoptInt(fd, SOL_UDP, UDP_GRO)
		require.NoError(t, err)
		require.Equal(t, 1, v)
		require.NoError(t, ProbeUDPSegment(fd))
		require.NoError(t, SetSocketBuffer(fd, false, 64<<10, false))
		got, err := SocketBuffer(fd, false)
		require.NoError(t, err)
		require.GreaterOrEqual(t, got, 64<<10)
	}))
}

func TestCmsgRoundTrip(t *testing.T) {
	if !Supported {
		t.Skip("control messages are Linux-only")
	}
	b := AppendCmsg(nil, IPPROTO_IP, IP_TOS, []byte{2})
	b = AppendCmsg(b, SOL_UDP, UDP_SEGMENT, []byte{0xb0, 0x04})
	require.Len(t, b, CmsgSpace(1)+CmsgSpace(2))
	level, typ, data, rest, err := NextCmsg(b)
	require.NoError(t, err)
	require.Equal(t, []any{int32(IPPROTO_IP), int32(IP_TOS), []byte{2}}, []any{level, typ, data})
	level, typ, data, rest, err = NextCmsg(rest)
	require.NoError(t, err)
	require.Equal(t, []any{int32(SOL_UDP), int32(UDP_SEGMENT), []byte{0xb0, 0x04}}, []any{level, typ, data})
	require.Empty(t, rest)
}

func TestProcessCPUTime(t *testing.T) {
	d, err := ProcessCPUTime()
	if !Supported {
		require.ErrorIs(t, err, ErrNotSupported)
		return
	}
	require.NoError(t, err)
	require.Positive(t, d)
}
