package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

// Seeds for every target live in testdata/fuzz/FuzzXxx (generated from the
// vectors by TestFuzzCorpus -update-corpus), so `go test` replays them.

var sentinelErrors = []error{
	wire.ErrShortHeader, wire.ErrBadMagic, wire.ErrUnsupportedVersion, wire.ErrUnknownFlags,
	wire.ErrInvalidFlags, wire.ErrFrameTooLarge, wire.ErrTruncated, wire.ErrCountTooLarge,
	wire.ErrTrailingBytes, wire.ErrInvalidUTF8, wire.ErrBadAckMode, wire.ErrBadAckStatus,
	wire.ErrUnknownMessageType, wire.ErrMissingField, wire.ErrMalformedJSON,
}

// requireSentinel fails unless err matches a package sentinel.
func requireSentinel(t *testing.T, err error) {
	t.Helper()
	for _, s := range sentinelErrors {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("error %v (%T) matches no wire sentinel", err, err)
}

// fuzzMaxFrame keeps fuzz inputs from exercising 16 MiB frames while still
// letting the cap check fire.
const fuzzMaxFrame = 1 << 20

func FuzzFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		h, payload, _, err := wire.SplitFrame(data, fuzzMaxFrame)
		if err != nil {
			requireSentinel(t, err)
			return
		}
		frame := data[:wire.HeaderLen+len(payload)]
		switch h.Kind() {
		case wire.KindJSON:
			checkJSON(t, payload)
		case wire.KindPublishBatch:
			checkPublishBatch(t, h.Flags, payload, frame)
		case wire.KindAckedPublishBatch:
			checkAckedPublish(t, h.Flags, payload, frame)
		case wire.KindPublishAck:
			checkPublishAck(t, h.Flags, payload, frame)
		default:
			checkEventBatch(t, h.Flags, payload, frame)
		}
	})
}

func FuzzPublishBatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, payload []byte) { checkPublishBatch(t, wire.FlagBinaryPublishBatch, payload, nil) })
}

// FuzzShardPublish decodes shard-addressed publishes (0x0801, 0x0809).
func FuzzShardPublish(f *testing.F) {
	f.Fuzz(func(t *testing.T, acked bool, payload []byte) {
		flags := wire.FlagBinaryPublishBatch | wire.FlagPublishShard
		if acked {
			checkAckedPublish(t, flags|wire.FlagBinaryPublishAcked, payload, nil)
			return
		}
		checkPublishBatch(t, flags, payload, nil)
	})
}

// FuzzOwnerAck decodes owner-naming acks (0x0410).
func FuzzOwnerAck(f *testing.F) {
	f.Fuzz(func(t *testing.T, payload []byte) {
		checkPublishAck(t, wire.FlagBinaryPublishAck|wire.FlagAckOwner, payload, nil)
	})
}

func FuzzAckedPublish(f *testing.F) {
	f.Fuzz(func(t *testing.T, payload []byte) {
		checkAckedPublish(t, wire.FlagBinaryPublishBatch|wire.FlagBinaryPublishAcked, payload, nil)
	})
}

func FuzzPublishAck(f *testing.F) {
	f.Fuzz(func(t *testing.T, payload []byte) { checkPublishAck(t, wire.FlagBinaryPublishAck, payload, nil) })
}

func FuzzEventBatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, flags uint16, payload []byte) { checkEventBatch(t, wire.Flags(flags), payload, nil) })
}

func FuzzJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, payload []byte) { checkJSON(t, payload) })
}

// requireReencodes checks that a successful decode re-encodes to exactly the
// input: binary layouts have one encoding per value.
func requireReencodes(t *testing.T, enc []byte, err error, payload, frame []byte) {
	t.Helper()
	require.NoError(t, err)
	require.Equal(t, payload, enc[wire.HeaderLen:])
	if frame != nil {
		require.Equal(t, frame, enc)
	}
}

func checkPublishBatch(t *testing.T, flags wire.Flags, payload, frame []byte) {
	var b wire.PublishBatch
	if err := wire.DecodePublishBatchFlags(flags, payload, &b); err != nil {
		requireSentinel(t, err)
		return
	}
	var enc []byte
	var err error
	if b.HasShard {
		enc, err = wire.AppendShardPublishBatchFrame(nil, b.Shard, b.TenantID, b.Namespace, b.Stream, b.Payloads)
	} else {
		enc, err = wire.AppendPublishBatchFrame(nil, b.TenantID, b.Namespace, b.Stream, b.Payloads)
	}
	requireReencodes(t, enc, err, payload, frame)
	var again wire.PublishBatch
	require.NoError(t, wire.DecodePublishBatchFlags(flags, enc[wire.HeaderLen:], &again))
	require.Equal(t, b, again)
}

func checkAckedPublish(t *testing.T, flags wire.Flags, payload, frame []byte) {
	var b wire.AckedPublish
	if err := wire.DecodeAckedPublishFlags(flags, payload, &b); err != nil {
		requireSentinel(t, err)
		return
	}
	var enc []byte
	var err error
	if b.HasShard {
		enc, err = wire.AppendShardAckedPublishFrame(nil, b.RequestID, b.Mode, b.Shard, b.TenantID, b.Namespace, b.Stream, b.Payloads)
	} else {
		enc, err = wire.AppendAckedPublishFrame(nil, b.RequestID, b.Mode, b.TenantID, b.Namespace, b.Stream, b.Payloads)
	}
	requireReencodes(t, enc, err, payload, frame)
	var again wire.AckedPublish
	require.NoError(t, wire.DecodeAckedPublishFlags(flags, enc[wire.HeaderLen:], &again))
	require.Equal(t, b, again)
}

func checkPublishAck(t *testing.T, flags wire.Flags, payload, frame []byte) {
	var a wire.PublishAck
	if err := wire.DecodePublishAckFlags(flags, payload, &a); err != nil {
		requireSentinel(t, err)
		return
	}
	enc, err := wire.AppendPublishAckFrame(nil, a)
	requireReencodes(t, enc, err, payload, frame)
	var again wire.PublishAck
	require.NoError(t, wire.DecodePublishAckFlags(flags, enc[wire.HeaderLen:], &again))
	require.Equal(t, a, again)
}

func checkEventBatch(t *testing.T, flags wire.Flags, payload, frame []byte) {
	var e wire.EventBatch
	if err := wire.DecodeEventBatch(flags, payload, &e); err != nil {
		requireSentinel(t, err)
		return
	}
	require.Equal(t, flags, e.Flags())
	enc, err := wire.AppendEventBatchFrame(nil, e)
	requireReencodes(t, enc, err, payload, frame)
	var again wire.EventBatch
	require.NoError(t, wire.DecodeEventBatch(flags, enc[wire.HeaderLen:], &again))
	require.Equal(t, e, again)
}

// checkJSON: JSON has many spellings of one value, so the round trip is
// decode → encode → decode, and the canonical encoding must be a fixed
// point.
func checkJSON(t *testing.T, payload []byte) {
	m, err := wire.DecodeJSON(payload)
	if err != nil {
		requireSentinel(t, err)
		return
	}
	enc := m.AppendJSON(nil)
	again, err := wire.DecodeJSON(enc)
	require.NoError(t, err, "%s", enc)
	require.Equal(t, m, again)
	require.True(t, bytes.Equal(enc, again.AppendJSON(nil)))
}
