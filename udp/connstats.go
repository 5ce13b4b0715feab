package udp

import (
	"context"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// ConnStats records the few qlog events quic-go's ConnectionStats lacks —
// the current path MTU, losses, queue drops, congestion and ECN state, PTO
// count — for one connection. It is a qlogwriter.Trace: hand it out from
// quic.Config.Tracer (StatsTracer does, from the context). Safe for
// concurrent use.
//
// Cost: with any tracer set quic-go builds an event per packet; this
// recorder only type-switches on it and locks for the handful it keeps
// (measured: within the noise of a transfer benchmark).
type ConnStats struct {
	mu struct {
		sync.Mutex
		s ConnSnapshot
	}
}

// ConnSnapshot is a copy of a connection's recorded state. Combine it with
// quic.Conn.ConnectionStats (RTT, bytes, packets) and ConnectionState().GSO
// for the periodic log line (FELIX_CONN_STATS_MS) and /debug/felix/stats.
type ConnSnapshot struct {
	MTU              int           `json:"mtu"`               // current max packet size; 0 until the first MTUUpdated
	MTUSearchDone    bool          `json:"mtu_search_done"`   // path MTU discovery has finished
	PacketsLost      uint64        `json:"packets_lost"`      // declared lost, MTU probes included
	MTUProbesLost    uint64        `json:"mtu_probes_lost"`   // of which MTU probes
	SpuriousLosses   uint64        `json:"spurious_losses"`   // declared lost, then acknowledged
	PacketsDropped   uint64        `json:"packets_dropped"`   // received but dropped by quic-go
	QueueDrops       uint64        `json:"queue_drops"`       // of which for a full per-connection queue (dos_prevention)
	CongestionState  string        `json:"congestion_state"`  // slow_start, congestion_avoidance, recovery, application_limited
	CongestionEvents uint64        `json:"congestion_events"` // entries into recovery
	ECNState         string        `json:"ecn_state"`         // testing, unknown, failed, capable
	PTOCount         uint32        `json:"pto_count"`         // consecutive probe timeouts now
	MaxPTOCount      uint32        `json:"max_pto_count"`     // the most seen in a row
	CongestionWindow int           `json:"congestion_window"` // bytes
	BytesInFlight    int           `json:"bytes_in_flight"`   // bytes
	SmoothedRTT      time.Duration `json:"smoothed_rtt_ns"`
}

// NewConnStats returns a recorder whose MTU starts at the connection's
// InitialPacketSize (0: quic-go's default, 1280). quic-go reports the MTU
// only when discovery raises it (MTUUpdated), so with discovery off the
// start is the MTU for the connection's life.
func NewConnStats(initialPacketSize uint16) *ConnStats {
	s := &ConnStats{}
	s.mu.s.MTU = int(initialPacketSize)
	if s.mu.s.MTU == 0 {
		s.mu.s.MTU = DefaultPacketSize
	}
	return s
}

// AddProducer implements qlogwriter.Trace.
func (s *ConnStats) AddProducer() qlogwriter.Recorder { return statsRecorder{s} }

// Snapshot returns the current state.
func (s *ConnStats) Snapshot() ConnSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.s
}

// record folds one event in.
func (s *ConnStats) record(ev qlogwriter.Event) {
	switch e := ev.(type) {
	case qlog.MTUUpdated:
		s.update(func(c *ConnSnapshot) { c.MTU, c.MTUSearchDone = e.Value, e.Done })
	case qlog.PacketLost:
		s.update(func(c *ConnSnapshot) {
			c.PacketsLost++
			if e.IsMTUProbePacket {
				c.MTUProbesLost++
			}
		})
	case qlog.SpuriousLoss:
		s.update(func(c *ConnSnapshot) { c.SpuriousLosses++ })
	case qlog.PacketDropped:
		s.update(func(c *ConnSnapshot) {
			c.PacketsDropped++
			if e.Trigger == qlog.PacketDropDOSPrevention {
				c.QueueDrops++
			}
		})
	case qlog.CongestionStateUpdated:
		s.update(func(c *ConnSnapshot) {
			if e.State == qlog.CongestionStateRecovery && c.CongestionState != string(e.State) {
				c.CongestionEvents++
			}
			c.CongestionState = e.State.String()
		})
	case qlog.ECNStateUpdated:
		s.update(func(c *ConnSnapshot) { c.ECNState = string(e.State) })
	case qlog.PTOCountUpdated:
		s.update(func(c *ConnSnapshot) {
			c.PTOCount = e.PTOCount
			c.MaxPTOCount = max(c.MaxPTOCount, e.PTOCount)
		})
	case qlog.MetricsUpdated:
		s.update(func(c *ConnSnapshot) {
			c.CongestionWindow, c.BytesInFlight = e.CongestionWindow, e.BytesInFlight
			if e.SmoothedRTT != 0 {
				c.SmoothedRTT = e.SmoothedRTT
			}
		})
	}
}

func (s *ConnStats) update(f func(*ConnSnapshot)) {
	s.mu.Lock()
	f(&s.mu.s)
	s.mu.Unlock()
}

type statsRecorder struct{ s *ConnStats }

func (r statsRecorder) RecordEvent(ev qlogwriter.Event) { r.s.record(ev) }
func (r statsRecorder) Close() error                    { return nil }

type connStatsKey struct{}

// WithConnStats returns ctx carrying s, for StatsTracer to find: the
// client passes it to Transport.Dial, the server returns it from
// Transport.ConnContext. quic.Conn.Context() carries it afterwards.
func WithConnStats(ctx context.Context, s *ConnStats) context.Context {
	return context.WithValue(ctx, connStatsKey{}, s)
}

// ConnStatsFrom returns the recorder in ctx (e.g. quic.Conn.Context()), or
// nil.
func ConnStatsFrom(ctx context.Context) *ConnStats {
	s, _ := ctx.Value(connStatsKey{}).(*ConnStats)
	return s
}

// StatsTracer is a quic.Config.Tracer that returns the ConnStats found in
// the connection's context, or no tracer at all.
func StatsTracer(ctx context.Context, isClient bool, _ quic.ConnectionID) qlogwriter.Trace {
	if s := ConnStatsFrom(ctx); s != nil {
		return s
	}
	return nil // an untyped nil: quic-go checks the interface against nil
}
