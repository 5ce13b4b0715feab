package udp_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/udp"
)

type fakeAddr string

func (a fakeAddr) Network() string { return "udp" }
func (a fakeAddr) String() string  { return string(a) }

func TestMTUPolicy(t *testing.T) {
	lo4 := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	lo6 := &net.UDPAddr{IP: net.IPv6loopback, Port: 1}
	remote := &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}
	on := func(size uint16) udp.MTUSettings { return udp.MTUSettings{InitialPacketSize: size} }
	off := func(size uint16) udp.MTUSettings {
		return udp.MTUSettings{InitialPacketSize: size, DisablePathMTUDiscovery: true}
	}
	for _, tc := range []struct {
		name     string
		platform string
		peer     net.Addr
		knobs    udp.MTUKnobs
		want     udp.MTUSettings
	}{
		{"loopback v4 starts at quic-go's max, no discovery", "linux", lo4, udp.MTUKnobs{}, off(1452)},
		{"loopback v6", "darwin", lo6, udp.MTUKnobs{}, off(1452)},
		{"loopback as a non-UDP addr", "linux", fakeAddr("127.0.0.1:4000"), udp.MTUKnobs{}, off(1452)},
		{"v4-mapped loopback", "linux", fakeAddr("[::ffff:127.0.0.1]:4000"), udp.MTUKnobs{}, off(1452)},
		{"remote peer 1280 with discovery", "linux", remote, udp.MTUKnobs{}, on(1280)},
		{"remote peer on windows", "windows", remote, udp.MTUKnobs{}, on(1280)},
		{"no DF on freebsd: no discovery", "freebsd", remote, udp.MTUKnobs{}, off(1280)},
		{"unknown peer is not loopback", "linux", nil, udp.MTUKnobs{}, on(1280)},
		{"explicit overrides loopback", "linux", lo4, udp.MTUKnobs{InitialMTU: 1300}, on(1300)},
		{"explicit for remote", "linux", remote, udp.MTUKnobs{InitialMTU: 1400}, on(1400)},
		{"explicit clamped up", "linux", remote, udp.MTUKnobs{InitialMTU: 576}, on(1200)},
		{"explicit clamped down", "linux", lo4, udp.MTUKnobs{InitialMTU: 9000}, on(1452)},
		{"explicit without DF", "openbsd", remote, udp.MTUKnobs{InitialMTU: 1350}, off(1350)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, udp.MTUPolicy(tc.platform, tc.peer, tc.knobs))
		})
	}
}

func TestBlackHoleMTU(t *testing.T) {
	t0 := time.Unix(1000, 0)
	normal := udp.MTUSettings{InitialPacketSize: 1280}
	cooled := udp.MTUSettings{InitialPacketSize: 1200, DisablePathMTUDiscovery: true}
	for _, tc := range []struct {
		name      string
		now       time.Time
		stalledAt time.Time
		cooldown  time.Duration
		want      udp.MTUSettings
	}{
		{"never stalled", t0, time.Time{}, time.Second, normal},
		{"just stalled", t0, t0, time.Second, cooled},
		{"inside the cooldown", t0.Add(999 * time.Millisecond), t0, time.Second, cooled},
		{"cooldown over", t0.Add(time.Second), t0, time.Second, normal},
		{"zero cooldown means the 2 s default", t0.Add(1500 * time.Millisecond), t0, 0, cooled},
		{"default expires", t0.Add(2 * time.Second), t0, 0, normal},
		{"negative cooldown disables it", t0, t0, -1, normal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, udp.BlackHoleMTU(tc.now, tc.stalledAt, tc.cooldown, normal))
		})
	}
	require.False(t, udp.Stalled(udp.ConnSnapshot{PTOCount: udp.StallPTOs - 1}))
	require.True(t, udp.Stalled(udp.ConnSnapshot{PTOCount: udp.StallPTOs}))
}
