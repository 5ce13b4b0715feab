//go:build linux

package udp

import (
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"

	"github.com/felixmq/felix/internal/linux"
)

// receiver does one batched read: recvmmsg(2) on our own socket through
// the socket's RawConn, so it waits in the runtime's netpoller and the read
// deadline and Close interrupt it. The argument vector and the source
// addresses are reused from call to call; see linux.Mmsg and addrCache.
// One goroutine reads at a time (quic-go's read loop, or the pinned
// reader), so a receiver needs no lock.
type receiver struct {
	raw   linux.RawConn
	mm    *linux.Mmsg
	addrs addrCache
}

func newReceiver(uc *net.UDPConn) receiver {
	raw, _ := uc.SyscallConn() // New has already checked it
	return receiver{raw: raw}
}

func (r *receiver) read(ms []ipv4.Message) (int, error) {
	want := min(len(ms), maxBatchSize)
	if r.mm == nil || r.mm.Len() < want {
		// Sized by the first caller: our batch, or quic-go's 8 messages.
		r.mm = linux.NewMmsg(want)
	}
	for i := range want {
		r.mm.Set(i, ms[i].Buffers[0], ms[i].OOB)
	}
	var n int
	var rerr error
	for n == 0 { // recvmmsg returns at least one datagram or an error; never pass on (0, nil)
		err := r.raw.Read(func(fd uintptr) bool {
			n, rerr = r.mm.Recv(fd, want)
			return !linux.IsEAGAIN(rerr)
		})
		if err != nil {
			return 0, err // deadline or close, already a *net.OpError
		}
		if rerr != nil {
			return 0, &net.OpError{Op: "read", Net: "udp", Err: rerr}
		}
	}
	for i := range n {
		m := &ms[i]
		var from netip.AddrPort
		var scope uint32
		m.N, m.NN, m.Flags, from, scope = r.mm.Got(i)
		m.Addr = r.addrs.get(from, scope)
	}
	return n, nil
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
