package udp

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAddrCache: a repeated source gets the same *net.UDPAddr back (no
// allocation per datagram), a different one, even on the same slot, its
// own; IPv4 addresses come in x/net's 16-byte form.
func TestAddrCache(t *testing.T) {
	var c addrCache
	a := netip.MustParseAddrPort("127.0.0.1:4000")
	b := netip.MustParseAddrPort("127.0.0.2:4000") // same slot as a
	d := netip.MustParseAddrPort("[::1]:4001")

	ua := c.get(a, 0)
	require.Equal(t, "127.0.0.1:4000", ua.String())
	require.Len(t, ua.IP, net.IPv6len, "x/net's parseInetAddr form")
	require.Same(t, ua, c.get(a, 0))
	require.Zero(t, testing.AllocsPerRun(100, func() { c.get(a, 0) }))

	ub := c.get(b, 0)
	require.Equal(t, "127.0.0.2:4000", ub.String())
	require.Equal(t, "[::1]:4001", c.get(d, 0).String())
	require.Equal(t, "127.0.0.1:4000", c.get(a, 0).String(), "a was evicted by b, not aliased")

	lo, err := net.InterfaceByIndex(1)
	if err == nil {
		ll := netip.MustParseAddrPort("[fe80::1]:4002")
		require.Equal(t, lo.Name, c.get(ll, 1).Zone)
		require.Empty(t, c.get(ll, 0).Zone, "scope is part of the key")
	}
}
