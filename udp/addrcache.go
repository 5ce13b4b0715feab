package udp

import (
	"net"
	"net/netip"
	"strconv"
)

// addrCache hands out one *net.UDPAddr per recently seen source address,
// so a read allocates nothing for a peer it has seen in the last few
// distinct sources (a loaded socket hears from a handful of peers in a
// row; x/net's ReadBatch allocated an address and its IP per datagram).
// The addresses are shared: quic-go only reads them (it compares and
// sends to them), and callers of ReadBatch must not modify them.
//
// Direct-mapped on the port, so a lookup is one comparison. Owned by the
// reading goroutine.
type addrCache struct {
	slot [addrCacheSlots]struct {
		key   netip.AddrPort
		scope uint32
		addr  *net.UDPAddr
	}
}

const addrCacheSlots = 16

func (c *addrCache) get(ap netip.AddrPort, scope uint32) *net.UDPAddr {
	s := &c.slot[ap.Port()%addrCacheSlots]
	if s.addr != nil && s.key == ap && s.scope == scope {
		return s.addr
	}
	// Sixteen bytes for IPv4 too, as x/net's parseInetAddr (and so quic-go
	// on a stock socket) gives them.
	ip16 := ap.Addr().As16()
	a := &net.UDPAddr{IP: net.IP(ip16[:]), Port: int(ap.Port())}
	if scope != 0 {
		a.Zone = zoneName(scope)
	}
	s.key, s.scope, s.addr = ap, scope, a
	return a
}

// zoneName is the interface name for an IPv6 scope id, or its number when
// the interface is gone (what net.UDPAddr.String prints either way).
func zoneName(index uint32) string {
	if ifi, err := net.InterfaceByIndex(int(index)); err == nil {
		return ifi.Name
	}
	return strconv.FormatUint(uint64(index), 10)
}
