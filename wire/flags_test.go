package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

func TestKindFromFlagsExhaustive(t *testing.T) {
	layouts := map[wire.Flags]wire.Kind{0x0000: wire.KindJSON}
	// Event batches: any of offsets, publisher, timestamps, headers.
	mods := []wire.Flags{wire.FlagEventBatchOffsets, wire.FlagEventPublisher, wire.FlagEventTimestamps, wire.FlagHeaders}
	for set := range 1 << len(mods) {
		var m wire.Flags
		for i, bit := range mods {
			if set&(1<<i) != 0 {
				m |= bit
			}
		}
		layouts[0x0002|m] = wire.KindEventBatch
		layouts[0x0004|m] = wire.KindEventBatchShared
	}
	// Publishes: no address, a key or a shard; unacked, acked or
	// idempotent; with or without headers.
	for _, addr := range []wire.Flags{0, wire.FlagPublishKeyed, wire.FlagShard} {
		for _, h := range []wire.Flags{0, wire.FlagHeaders} {
			layouts[0x0001|addr|h] = wire.KindPublishBatch
			layouts[0x0009|addr|h] = wire.KindAckedPublishBatch
			layouts[0x0109|addr|h] = wire.KindAckedPublishBatch
		}
	}
	// Acks: any of owner, code (with or without detail), offset, shard.
	for _, owner := range []wire.Flags{0, wire.FlagAckOwner} {
		for _, code := range []wire.Flags{0, wire.FlagAckCode, wire.FlagAckCode | wire.FlagAckDetail} {
			for _, off := range []wire.Flags{0, wire.FlagAckOffset} {
				for _, sh := range []wire.Flags{0, wire.FlagShard} {
					layouts[0x0010|owner|code|off|sh] = wire.KindPublishAck
				}
			}
		}
	}
	require.Len(t, layouts, 1+32+18+24)
	for f := 0; f <= 0xFFFF; f++ {
		flags := wire.Flags(f)
		k, err := wire.KindFromFlags(flags)
		want, ok := layouts[flags]
		switch {
		case ok:
			require.NoError(t, err, "flags %s", flags)
			require.Equal(t, want, k, "flags %s", flags)
			require.True(t, wire.ValidLayout(flags))
		case flags&^wire.KnownFlags != 0:
			require.ErrorIs(t, err, wire.ErrUnknownFlags, "flags %s", flags)
		default:
			require.ErrorIs(t, err, wire.ErrInvalidFlags, "flags %s", flags)
		}
	}
	for _, c := range []wire.Flags{wire.CapGapNotices, wire.CapQueue, wire.CapForwarded} {
		_, err := wire.KindFromFlags(c)
		require.ErrorIs(t, err, wire.ErrUnknownFlags, "a capability is never a frame flag")
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

	// The published 0.6 client offers 0x7FFF: the bits we do not
	// implement are dropped from the usable set.
	require.Equal(t, wire.Flags(0x77FF), wire.Negotiate(wire.KnownCapabilities, 0x7FFF))
	require.Equal(t, wire.Flags(0xF7FF), wire.KnownFlags)

	// Felix-Go capabilities ride in their own word, with their old values.
	caps := uint32(0x23C0)
	peer := wire.PeerSet(&v, &caps)
	require.True(t, wire.Supports(peer, wire.CapGapNotices|wire.CapCache|wire.CapRoster|wire.CapQueue|wire.CapQueueShards))
	require.False(t, wire.Supports(peer, wire.CapForwarded))
	require.Equal(t, uint16(0x19), peer.FrameFlags())
	require.Equal(t, caps, peer.Caps())
	require.Equal(t, wire.Flags(0x19), wire.PeerSet(&v, nil), "no caps word: no capabilities")
	require.Equal(t, uint32(0x2FC0), wire.KnownCapabilities.Caps())
	require.Equal(t, uint16(0xF7FF), wire.KnownCapabilities.FrameFlags())
	require.False(t, wire.Supports(wire.KnownCapabilities, wire.CapForwarded), "no ordinary client claims forwarding")

	require.True(t, wire.KnownFeatures.Has(wire.FeatureIdempotentProducer|wire.FeatureErrorCodes))
	require.False(t, wire.KnownFeatures.Has(0))
	require.Equal(t, wire.Features(0), wire.PeerFeatures(nil))
}
