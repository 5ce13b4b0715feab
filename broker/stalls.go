package broker

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/udp"
	"github.com/felixmq/felix/wire"
)

// stallMemory remembers peers whose client closed a connection because the
// path stalled, so the broker's next connections with that peer start at
// the black-hole size as the client's redial does: each side sizes its own
// packets from its own quic.Config, so a client at 1200 alone would still
// receive the broker's full-size packets through the black hole.
type stallMemory struct {
	cooldown time.Duration // < 0: off
	mu       sync.Mutex
	at       map[netip.Addr]time.Time
}

func newStallMemory(cooldown time.Duration) *stallMemory {
	if cooldown == 0 {
		cooldown = udp.DefaultBlackHoleCooldown
	}
	return &stallMemory{cooldown: cooldown, at: map[netip.Addr]time.Time{}}
}

// noteClose records the peer when its connection ended with the client's
// ClosePathStalled code.
func (m *stallMemory) noteClose(peer net.Addr, cause error) {
	var ae *quic.ApplicationError
	if m.cooldown < 0 || !errors.As(cause, &ae) || !ae.Remote || uint64(ae.ErrorCode) != wire.ClosePathStalled {
		return
	}
	ip, ok := peerIP(peer)
	if !ok {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for a, t := range m.at { // bounded by the peers that stalled within a cooldown
		if now.Sub(t) >= m.cooldown {
			delete(m.at, a)
		}
	}
	m.at[ip] = now
}

// settings is the MTU for a new connection from peer.
func (m *stallMemory) settings(peer net.Addr, normal udp.MTUSettings) udp.MTUSettings {
	ip, ok := peerIP(peer)
	if !ok || m.cooldown < 0 {
		return normal
	}
	m.mu.Lock()
	at := m.at[ip]
	m.mu.Unlock()
	return udp.BlackHoleMTU(time.Now(), at, m.cooldown, normal)
}

func peerIP(a net.Addr) (netip.Addr, bool) {
	ua, ok := a.(*net.UDPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(ua.IP)
	return ip.Unmap(), ok
}
