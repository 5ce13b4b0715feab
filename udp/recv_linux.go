//go:build linux

package udp

import (
	"net"

	"golang.org/x/net/ipv4"

	"github.com/felixmq/felix/internal/linux"
)

// receiver does one batched read: recvmmsg(2) through x/net's
// ipv4.PacketConn on our own socket. It blocks in the runtime's netpoller,
// so the socket's read deadline and Close interrupt it. (ipv4 vs ipv6 does
// not matter: both packages' Message is x/net/internal/socket.Message and
// the address is parsed by family.)
type receiver struct {
	pc *ipv4.PacketConn
}

func newReceiver(uc *net.UDPConn) receiver { return receiver{pc: ipv4.NewPacketConn(uc)} }

func (r receiver) read(ms []ipv4.Message) (int, error) {
	for {
		n, err := r.pc.ReadBatch(ms, 0)
		if err != nil || n > 0 {
			return n, err
		}
	}
}

// enableGRO turns UDP_GRO on. ok is false when the kernel refuses (older
// than 5.0, or not a UDP socket).
func enableGRO(raw linux.RawConn) (ok bool, err error) {
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = linux.EnableUDPGRO(fd) }); err != nil {
		return false, err
	}
	return serr == nil, serr
}

// gsoCapable reports whether the kernel knows UDP_SEGMENT, by the probe
// quic-go itself runs (isGSOEnabled, sys_conn_helper_linux.go).
func gsoCapable(raw linux.RawConn) bool {
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = linux.ProbeUDPSegment(fd) }); err != nil {
		return false
	}
	return serr == nil
}
