//go:build linux

package linux

import (
	"encoding/binary"
	"net/netip"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mmsg is the argument vector of recvmmsg(2), one datagram per slot:
// headers, iovecs and source-address buffers allocated once and reused, so
// a call allocates nothing. (x/net's ipv4.PacketConn.ReadBatch packs the
// same vector from a pool on every call and allocates a *net.UDPAddr per
// datagram.) Each slot reads into one buffer and one control buffer, set
// with Set before each call; the kernel rewrites the lengths, so Set is
// needed again whenever a slot is reused.
//
// An Mmsg belongs to one goroutine at a time. Its headers point into the
// buffers given to Set: they must stay alive until the next Set.
type Mmsg struct {
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
}

// NewMmsg returns a vector of n slots.
func NewMmsg(n int) *Mmsg {
	m := &Mmsg{
		hdrs:  make([]unix.Mmsghdr, n),
		iovs:  make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrInet6, n),
	}
	for i := range m.hdrs {
		h := &m.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&m.names[i]))
		h.Iov = &m.iovs[i]
		h.SetIovlen(1)
	}
	return m
}

// Len is the number of slots.
func (m *Mmsg) Len() int { return len(m.hdrs) }

// Set points slot i at buf and oob (oob may be empty).
func (m *Mmsg) Set(i int, buf, oob []byte) {
	h := &m.hdrs[i].Hdr
	iov := &m.iovs[i]
	iov.Base = unsafe.SliceData(buf)
	iov.SetLen(len(buf))
	h.Namelen = unix.SizeofSockaddrInet6
	h.Control = unsafe.SliceData(oob)
	h.SetControllen(len(oob))
	h.Flags = 0
}

// Recv is one non-blocking recvmmsg(2) on fd into the first n slots. It
// returns the number of datagrams read; EAGAIN comes back as an errno
// (wrapped in *os.SyscallError) the caller's poll loop tests with
// IsEAGAIN. The call returns as soon as the socket queue is empty
// (MSG_DONTWAIT).
func (m *Mmsg) Recv(fd uintptr, n int) (int, error) {
	got, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[0])),
		uintptr(n), unix.MSG_DONTWAIT, 0, 0)
	if errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", errno)
	}
	return int(got), nil
}

// IsEAGAIN reports whether err is Recv's "nothing to read".
func IsEAGAIN(err error) bool {
	se, ok := err.(*os.SyscallError)
	return ok && se.Err == unix.EAGAIN
}

// Got returns what the last Recv put in slot i: the datagram's length, the
// control messages' length, recvmsg's flags (MSG_TRUNC and so on) and the
// source address (a zero AddrPort if the family is neither IPv4 nor IPv6).
// scope is the IPv6 scope id (interface index), 0 otherwise.
func (m *Mmsg) Got(i int) (n, oobn, flags int, from netip.AddrPort, scope uint32) {
	h := &m.hdrs[i]
	from, scope = sockaddrAddrPort(&m.names[i], h.Hdr.Namelen)
	return int(h.Len), int(h.Hdr.Controllen), int(h.Hdr.Flags), from, scope
}

// sockaddrAddrPort decodes a sockaddr_in or sockaddr_in6 (ip(7), ipv6(7)):
// the port is big-endian on the wire, the family native.
func sockaddrAddrPort(sa *unix.RawSockaddrInet6, namelen uint32) (netip.AddrPort, uint32) {
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	switch {
	case sa.Family == unix.AF_INET && namelen >= unix.SizeofSockaddrInet4:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port), 0
	case sa.Family == unix.AF_INET6 && namelen >= unix.SizeofSockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), port), sa.Scope_id
	}
	return netip.AddrPort{}, 0
}
