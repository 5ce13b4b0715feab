package udp

import (
	"net"
	"net/netip"
	"time"

	"github.com/quic-go/quic-go"
)

// quic-go's packet size limits (internal/protocol): it never sends or
// accepts more than 1452 bytes of UDP payload, and refuses to start below
// 1200. Configs returned from GetConfigForClient skip quic-go's
// validateConfig, so MTUPolicy clamps itself.
const (
	MinPacketSize       = 1200
	MaxPacketSize       = 1452
	DefaultPacketSize   = 1280 // quic-go's own start when InitialPacketSize is 0
	BlackHolePacketSize = MinPacketSize

	// DefaultBlackHoleCooldown is FELIX_MTU_BLACK_HOLE_COOLDOWN_MS's default
	// (the published Felix's 2 s: a spurious collapse heals at the next
	// idle gap).
	DefaultBlackHoleCooldown = 2 * time.Second
	// StallPTOs is the number of consecutive probe timeouts that count as a
	// stalled path (quic-go has no black-hole detection of its own). The
	// timeouts double from ~25 ms on loopback, so 5 of them are ~0.8 s of
	// silence: 3 (~0.2 s) also fired on live loopback connections of a
	// 2-core machine overloaded by 500 subscribers.
	StallPTOs = 5
)

// MTUKnobs are the operator's MTU settings.
type MTUKnobs struct {
	// InitialMTU is FELIX_INITIAL_MTU: 0 means the policy's choice; any
	// other value is clamped to [1200, 1452], is both the start and the
	// floor (quic-go never goes below InitialPacketSize), and turns the
	// loopback special case off.
	InitialMTU int
}

// MTUSettings are the quic.Config fields the policy decides.
type MTUSettings struct {
	InitialPacketSize       uint16
	DisablePathMTUDiscovery bool
}

// Apply writes the settings into conf.
func (s MTUSettings) Apply(conf *quic.Config) {
	conf.InitialPacketSize = s.InitialPacketSize
	conf.DisablePathMTUDiscovery = s.DisablePathMTUDiscovery
}

// MTUPolicy is the per-peer MTU decision, for quic.Config on Dial and in
// GetConfigForClient (platform is runtime.GOOS):
//   - loopback peers start at 1452, the most quic-go can send, with path
//     MTU discovery off: nothing to discover, and no probe can be lost;
//   - other peers start at 1280 with discovery on, on platforms where
//     quic-go sets DF (linux, android, darwin, ios, windows); elsewhere
//     quic-go cannot discover, so discovery is off and 1280 stays;
//   - an explicit InitialMTU replaces both starts (clamped to
//     [1200, 1452]) and keeps discovery wherever DF exists.
func MTUPolicy(platform string, peer net.Addr, k MTUKnobs) MTUSettings {
	discover := hasDF(platform)
	if k.InitialMTU != 0 {
		return MTUSettings{InitialPacketSize: clampPacketSize(k.InitialMTU), DisablePathMTUDiscovery: !discover}
	}
	if isLoopback(peer) {
		return MTUSettings{InitialPacketSize: MaxPacketSize, DisablePathMTUDiscovery: true}
	}
	return MTUSettings{InitialPacketSize: DefaultPacketSize, DisablePathMTUDiscovery: !discover}
}

// MTUGuaranteed reports whether the path to peer carries the largest
// packet for certain: a loopback peer under the policy's own choice (no
// explicit InitialMTU). There no MTU black hole can exist, so a connection
// that goes quiet there is a busy machine, never a path to redial at a
// smaller size.
func MTUGuaranteed(peer net.Addr, k MTUKnobs) bool {
	return k.InitialMTU == 0 && isLoopback(peer)
}

// BlackHoleMTU is the redial decision after a stall: while now is within
// cooldown of stalledAt, dial that peer at 1200 with discovery off (a
// size every QUIC path must carry); afterwards, the normal policy again.
// A zero stalledAt means no stall; cooldown 0 means DefaultBlackHoleCooldown.
func BlackHoleMTU(now, stalledAt time.Time, cooldown time.Duration, normal MTUSettings) MTUSettings {
	if cooldown == 0 {
		cooldown = DefaultBlackHoleCooldown
	}
	if stalledAt.IsZero() || cooldown < 0 || !now.Before(stalledAt.Add(cooldown)) {
		return normal
	}
	return MTUSettings{InitialPacketSize: BlackHolePacketSize, DisablePathMTUDiscovery: true}
}

// Stalled reports whether a connection's path looks black-holed: StallPTOs
// probe timeouts in a row (quic-go resets the count on every ACK). Probe
// timeouts alone also come from peers starved of CPU, so the caller wants
// more evidence (the peer silent too, its own clock on time, a path that
// is not MTUGuaranteed) before it closes the connection and redials with
// BlackHoleMTU.
func Stalled(s ConnSnapshot) bool { return s.PTOCount >= StallPTOs }

func clampPacketSize(n int) uint16 {
	return uint16(min(max(n, MinPacketSize), MaxPacketSize))
}

// hasDF lists the platforms where quic-go sets the Don't Fragment bit
// (sys_conn_df_linux.go, _darwin.go, _windows.go); without DF its path MTU
// discovery cannot work.
func hasDF(platform string) bool {
	switch platform {
	case "linux", "android", "darwin", "ios", "windows":
		return true
	}
	return false
}

func isLoopback(a net.Addr) bool {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a != nil && a.IP.IsLoopback()
	case *net.TCPAddr:
		return a != nil && a.IP.IsLoopback()
	case *net.IPAddr:
		return a != nil && a.IP.IsLoopback()
	case nil:
		return false
	default:
		ap, err := netip.ParseAddrPort(a.String())
		return err == nil && ap.Addr().Unmap().IsLoopback()
	}
}
