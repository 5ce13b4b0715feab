// Package netknobs declares the FELIX_* knobs that every Felix process with
// a QUIC connection reads, the broker and the client tools alike, so each is
// declared once (docs/design.md, "Knobs") and means the same on both ends:
// the MTU policy override, the black-hole cooldown and the connection stats
// interval. They are the udp package's settings in knob form, so the
// package sits under udp/, on its floor.
package netknobs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/felixmq/felix/internal/knob"
	"github.com/felixmq/felix/udp"
)

// Knobs are the declared knobs of one registry.
type Knobs struct {
	initialMTU        knob.String
	connStats         knob.Duration
	blackHoleCooldown knob.Duration
}

// Values are the knobs' values, in the units the broker and client configs
// take.
type Values struct {
	InitialMTU        int // 0: the per-peer policy
	ConnStatsInterval time.Duration
	BlackHoleCooldown time.Duration
}

// Declare adds the knobs to r.
func Declare(r *knob.Registry) Knobs {
	return Knobs{
		initialMTU: r.String("FELIX_INITIAL_MTU", "",
			fmt.Sprintf("empty, or a UDP payload size in [%d, %d]", udp.MinPacketSize, udp.MaxPacketSize),
			"start (and floor) packet size for every peer; empty: 1452 without discovery on loopback, 1280 with path-MTU discovery elsewhere",
			func(s string) error { _, err := parseMTU(s); return err }),
		connStats: r.Duration("FELIX_CONN_STATS_MS", 0, 0, 3600000, time.Millisecond,
			"log every connection's QUIC stats (RTT, MTU, losses, congestion, GSO) at this interval; 0 = off"),
		blackHoleCooldown: r.Duration("FELIX_MTU_BLACK_HOLE_COOLDOWN_MS", 2000, 100, 600000, time.Millisecond,
			"after a path stalls, clients redial and the broker answers that peer at 1200 bytes without discovery for this long"),
	}
}

// Get reads the values from a loaded registry.
func (k Knobs) Get(v *knob.Values) Values {
	mtu, _ := parseMTU(k.initialMTU.Get(v)) // validated when v was loaded
	return Values{InitialMTU: mtu, ConnStatsInterval: k.connStats.Get(v), BlackHoleCooldown: k.blackHoleCooldown.Get(v)}
}

// parseMTU parses FELIX_INITIAL_MTU: empty (the policy) or a packet size.
func parseMTU(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < udp.MinPacketSize || n > udp.MaxPacketSize {
		return 0, fmt.Errorf("%q is not a packet size in [%d, %d]", s, udp.MinPacketSize, udp.MaxPacketSize)
	}
	return n, nil
}

// Load reads the knobs for a client process (a tool, not the broker, whose
// registry holds them with the rest): lookup is os.LookupEnv there.
func Load(lookup func(string) (string, bool)) (Values, error) {
	r := knob.New()
	k := Declare(r)
	v, err := r.Load(lookup)
	if err != nil {
		return Values{}, err
	}
	return k.Get(v), nil
}

// Apply sets the client config fields the knobs decide.
func (v Values) Apply(initialMTU *int, connStats, blackHoleCooldown *time.Duration) {
	*initialMTU, *connStats, *blackHoleCooldown = v.InitialMTU, v.ConnStatsInterval, v.BlackHoleCooldown
}
