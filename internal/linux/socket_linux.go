//go:build linux

package linux

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Socket option levels and names used by the udp package, re-exported from
// x/sys/unix. See udp(7) for UDP_GRO / UDP_SEGMENT and ip(7) / ipv6(7) for
// the rest.
const (
	SOL_SOCKET       = unix.SOL_SOCKET
	SOL_UDP          = unix.SOL_UDP
	IPPROTO_IP       = unix.IPPROTO_IP
	IPPROTO_IPV6     = unix.IPPROTO_IPV6
	UDP_GRO          = unix.UDP_GRO
	UDP_SEGMENT      = unix.UDP_SEGMENT
	IP_TOS           = unix.IP_TOS
	IP_RECVTOS       = unix.IP_RECVTOS
	IP_PKTINFO       = unix.IP_PKTINFO
	IPV6_TCLASS      = unix.IPV6_TCLASS
	IPV6_RECVTCLASS  = unix.IPV6_RECVTCLASS
	IPV6_PKTINFO     = unix.IPV6_PKTINFO
	IPV6_RECVPKTINFO = unix.IPV6_RECVPKTINFO
)

// EIO is the errno udp_send_skb returns when a device cannot do UDP
// segmentation offload; quic-go treats an *os.SyscallError carrying it as
// "turn GSO off for this connection" (quic-go sys_conn_helper_linux.go,
// isGSOError).
var EIO error = unix.EIO

// SetsockoptInt is setsockopt(2) with an int value.
func SetsockoptInt(fd uintptr, level, opt, value int) error {
	if err := unix.SetsockoptInt(int(fd), level, opt, value); err != nil {
		return fmt.Errorf("setsockopt(%d, %d): %w", level, opt, err)
	}
	return nil
}

// GetsockoptInt is getsockopt(2) for an int value.
func GetsockoptInt(fd uintptr, level, opt int) (int, error) {
	v, err := unix.GetsockoptInt(int(fd), level, opt)
	if err != nil {
		return 0, fmt.Errorf("getsockopt(%d, %d): %w", level, opt, err)
	}
	return v, nil
}

// EnableUDPGRO turns on UDP generic receive offload on a UDP socket (Linux
// 5.0, udp(7) UDP_GRO): the kernel may then deliver several datagrams of one
// flow as one buffer, with a UDP_GRO control message giving the segment size.
// Kernels without it fail with ENOPROTOOPT, reported as ErrNotSupported.
func EnableUDPGRO(fd uintptr) error {
	err := unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1)
	if err != nil {
		return fmt.Errorf("%w: setsockopt UDP_GRO: %w", ErrNotSupported, err)
	}
	return nil
}

// ProbeUDPSegment reports whether the kernel knows UDP_SEGMENT (GSO), by the
// same getsockopt quic-go uses (isGSOEnabled).
func ProbeUDPSegment(fd uintptr) error {
	if _, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT); err != nil {
		return fmt.Errorf("%w: getsockopt UDP_SEGMENT: %w", ErrNotSupported, err)
	}
	return nil
}

// SetSocketBuffer sets SO_RCVBUF (send false) or SO_SNDBUF (send true). With
// force it uses SO_RCVBUFFORCE / SO_SNDBUFFORCE, which ignore
// net.core.rmem_max / wmem_max but need CAP_NET_ADMIN (socket(7)).
func SetSocketBuffer(fd uintptr, send bool, bytes int, force bool) error {
	opt := unix.SO_RCVBUF
	switch {
	case send && force:
		opt = unix.SO_SNDBUFFORCE
	case send:
		opt = unix.SO_SNDBUF
	case force:
		opt = unix.SO_RCVBUFFORCE
	}
	if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, bytes); err != nil {
		return fmt.Errorf("setsockopt buffer %d: %w", opt, err)
	}
	return nil
}

// SocketBuffer reads SO_RCVBUF or SO_SNDBUF back. Linux reports twice the
// value that was set, the doubling being its allowance for bookkeeping
// (socket(7)).
func SocketBuffer(fd uintptr, send bool) (int, error) {
	opt := unix.SO_RCVBUF
	if send {
		opt = unix.SO_SNDBUF
	}
	v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, opt)
	if err != nil {
		return 0, fmt.Errorf("getsockopt buffer %d: %w", opt, err)
	}
	return v, nil
}
