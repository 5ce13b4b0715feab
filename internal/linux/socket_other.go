//go:build !linux

package linux

import "fmt"

// Socket option levels and names. The values are Linux's, as placeholders:
// the calls that take them are stubs here, and the cmsg helpers only meet
// them in messages nobody on this platform produces.
const (
	SOL_SOCKET       = 1
	SOL_UDP          = 17
	IPPROTO_IP       = 0
	IPPROTO_IPV6     = 41
	UDP_GRO          = 104
	UDP_SEGMENT      = 103
	IP_TOS           = 1
	IP_RECVTOS       = 13
	IP_PKTINFO       = 8
	IPV6_TCLASS      = 67
	IPV6_RECVTCLASS  = 66
	IPV6_PKTINFO     = 50
	IPV6_RECVPKTINFO = 49
)

// EIO stands in for the Linux errno; nothing on this platform returns it.
var EIO error = fmt.Errorf("%w: EIO", ErrNotSupported)

// SetsockoptInt is not available here.
func SetsockoptInt(fd uintptr, level, opt, value int) error {
	return fmt.Errorf("%w: setsockopt", ErrNotSupported)
}

// GetsockoptInt is not available here.
func GetsockoptInt(fd uintptr, level, opt int) (int, error) {
	return 0, fmt.Errorf("%w: getsockopt", ErrNotSupported)
}

// EnableUDPGRO is Linux-only.
func EnableUDPGRO(fd uintptr) error { return fmt.Errorf("%w: UDP_GRO", ErrNotSupported) }

// ProbeUDPSegment is Linux-only.
func ProbeUDPSegment(fd uintptr) error { return fmt.Errorf("%w: UDP_SEGMENT", ErrNotSupported) }

// SetSocketBuffer is not available here: callers use (*net.UDPConn).SetReadBuffer.
func SetSocketBuffer(fd uintptr, send bool, bytes int, force bool) error {
	return fmt.Errorf("%w: setsockopt buffer", ErrNotSupported)
}

// SocketBuffer is not available here.
func SocketBuffer(fd uintptr, send bool) (int, error) {
	return 0, fmt.Errorf("%w: getsockopt buffer", ErrNotSupported)
}
