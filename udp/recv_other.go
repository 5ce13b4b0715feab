//go:build !linux

package udp

import (
	"net"

	"golang.org/x/net/ipv4"

	"github.com/felixmq/felix/internal/linux"
)

// receiver reads one datagram per call with ReadMsgUDP: there is no
// recvmmsg here (x/net's ReadBatch does the same one-message loop).
type receiver struct {
	uc *net.UDPConn
}

func newReceiver(uc *net.UDPConn) receiver { return receiver{uc: uc} }

func (r receiver) read(ms []ipv4.Message) (int, error) {
	m := &ms[0]
	n, nn, flags, addr, err := r.uc.ReadMsgUDP(m.Buffers[0], m.OOB)
	if err != nil {
		return 0, err
	}
	m.N, m.NN, m.Flags, m.Addr = n, nn, flags, addr
	return 1, nil
}

// enableGRO: UDP GRO is Linux-only.
func enableGRO(raw linux.RawConn) (bool, error) { return false, ErrNotSupported }

// gsoCapable: quic-go never uses GSO off Linux.
func gsoCapable(raw linux.RawConn) bool { return false }
