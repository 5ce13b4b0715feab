package udp_test

import (
	"context"
	"testing"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/udp"
)

func TestConnStatsRecordsEvents(t *testing.T) {
	s := udp.NewConnStats(0)
	require.Equal(t, 1280, s.Snapshot().MTU, "quic-go's default start")
	r := s.AddProducer()
	for _, ev := range []qlogwriter.Event{
		qlog.MTUUpdated{Value: 1366},
		qlog.MTUUpdated{Value: 1441, Done: true},
		qlog.PacketLost{},
		qlog.PacketLost{IsMTUProbePacket: true},
		qlog.SpuriousLoss{},
		qlog.PacketDropped{Trigger: qlog.PacketDropDOSPrevention},
		qlog.PacketDropped{Trigger: qlog.PacketDropPayloadDecryptError},
		qlog.CongestionStateUpdated{State: qlog.CongestionStateSlowStart},
		qlog.CongestionStateUpdated{State: qlog.CongestionStateRecovery},
		qlog.CongestionStateUpdated{State: qlog.CongestionStateRecovery},
		qlog.CongestionStateUpdated{State: qlog.CongestionStateCongestionAvoidance},
		qlog.CongestionStateUpdated{State: qlog.CongestionStateRecovery},
		qlog.ECNStateUpdated{State: qlog.ECNStateCapable},
		qlog.PTOCountUpdated{PTOCount: 2},
		qlog.PTOCountUpdated{PTOCount: 0},
		qlog.MetricsUpdated{CongestionWindow: 40960, BytesInFlight: 1000, SmoothedRTT: 3},
		qlog.MetricsUpdated{CongestionWindow: 50000},
		qlog.KeyUpdated{},
	} {
		r.RecordEvent(ev)
	}
	require.NoError(t, r.Close())
	require.Equal(t, udp.ConnSnapshot{
		MTU: 1441, MTUSearchDone: true,
		PacketsLost: 2, MTUProbesLost: 1, SpuriousLosses: 1,
		PacketsDropped: 2, QueueDrops: 1,
		CongestionState: "recovery", CongestionEvents: 2,
		ECNState: "capable", PTOCount: 0, MaxPTOCount: 2,
		CongestionWindow: 50000, SmoothedRTT: 3,
	}, s.Snapshot())
}

func TestStatsTracerFindsContext(t *testing.T) {
	require.Nil(t, udp.StatsTracer(context.Background(), true, quic.ConnectionID{}))
	s := udp.NewConnStats(1452)
	ctx := udp.WithConnStats(context.Background(), s)
	require.Same(t, s, udp.ConnStatsFrom(ctx))
	require.Equal(t, s, udp.StatsTracer(ctx, false, quic.ConnectionID{}))
}
