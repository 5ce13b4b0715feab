package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

func TestKindFromFlagsExhaustive(t *testing.T) {
	layouts := map[wire.Flags]wire.Kind{
		0x0000: wire.KindJSON,
		0x0001: wire.KindPublishBatch,
		0x0009: wire.KindAckedPublishBatch,
		0x0010: wire.KindPublishAck,
		0x0002: wire.KindEventBatch,
		0x0022: wire.KindEventBatch,
		0x0004: wire.KindEventBatchShared,
		0x0024: wire.KindEventBatchShared,
		// Cluster modifiers (owner.go).
		0x0801: wire.KindPublishBatch,
		0x0809: wire.KindAckedPublishBatch,
		0x0410: wire.KindPublishAck,
	}
	for f := 0; f <= 0xFFFF; f++ {
		flags := wire.Flags(f)
		k, err := wire.KindFromFlags(flags)
		want, ok := layouts[flags]
		switch {
		case ok:
			require.NoError(t, err, "flags %s", flags)
			require.Equal(t, want, k, "flags %s", flags)
			require.True(t, wire.ValidLayout(flags))
		case flags&^(wire.KnownFlags|wire.FlagAckOwner|wire.FlagPublishShard) != 0:
			require.ErrorIs(t, err, wire.ErrUnknownFlags, "flags %s", flags)
		default:
			require.ErrorIs(t, err, wire.ErrInvalidFlags, "flags %s", flags)
		}
	}
}

func TestKindNames(t *testing.T) {
	for _, k := range []wire.Kind{wire.KindJSON, wire.KindPublishBatch, wire.KindAckedPublishBatch,
		wire.KindPublishAck, wire.KindEventBatch, wire.KindEventBatchShared} {
		got, ok := wire.ParseKind(k.String())
		require.True(t, ok, k.String())
		require.Equal(t, k, got)
	}
	_, ok := wire.ParseKind("binary_nope")
	require.False(t, ok)
}

func TestCapabilities(t *testing.T) {
	require.Equal(t, wire.OriginalV1Flags, wire.PeerFlags(nil), "absent client_flags = original v1")
	v := uint16(0x19)
	require.Equal(t, wire.Flags(0x19), wire.PeerFlags(&v), "the advertised value, not our constant")

	require.True(t, wire.Supports(0x3F, wire.FlagEventBatchOffsets))
	require.False(t, wire.Supports(wire.OriginalV1Flags, wire.FlagEventBatchOffsets))
	require.False(t, wire.Supports(wire.OriginalV1Flags, wire.FlagBinaryPublishAcked|wire.FlagBinaryPublishBatch))
	require.False(t, wire.Supports(0xFFFF, 0), "zero bit never supported")

	// Bits we do not know are dropped from the usable set.
	require.Equal(t, wire.Flags(0x0019), wire.Negotiate(wire.KnownCapabilities, 0x8019))
	require.Equal(t, wire.Flags(0x01C0), wire.Negotiate(wire.KnownCapabilities, 0x01C0))
	require.Equal(t, wire.Flags(0x00C0), wire.Negotiate(wire.KnownCapabilities, 0x40C0))
	require.Equal(t, wire.Flags(0x20C0), wire.Negotiate(wire.KnownCapabilities, 0x20C0), "CapQueueShards")
	require.Equal(t, wire.Flags(0x04C0), wire.Negotiate(wire.KnownCapabilities, 0x04C0), "CapOwner")

	// Capability-only bits extend KnownCapabilities, never the frame layouts.
	require.Equal(t, wire.Flags(0x2FFF), wire.KnownCapabilities)
	require.False(t, wire.Supports(wire.KnownCapabilities, wire.CapForwarded), "no ordinary client claims forwarding")
	require.Equal(t, wire.Flags(0x0300), wire.Negotiate(wire.KnownCapabilities, 0x0300))
	require.Equal(t, wire.Flags(0x003F), wire.KnownFlags)
	_, err := wire.KindFromFlags(wire.CapGapNotices)
	require.ErrorIs(t, err, wire.ErrUnknownFlags)
}
