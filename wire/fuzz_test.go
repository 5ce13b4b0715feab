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
	wire.ErrUnknownMessageType, wire.ErrMissingField, wire.ErrMalformedJSON, wire.ErrBadHeaders,
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

// The binary targets take the header flags too, so every modifier
// (keyed, idempotent, shard, owner, code, detail, offset) is fuzzed; flags
// that do not select the target's kind are skipped.

func FuzzPublishBatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, flags uint16, payload []byte) {
		if k, err := wire.KindFromFlags(wire.Flags(flags)); err == nil && k == wire.KindPublishBatch {
			checkPublishBatch(t, wire.Flags(flags), payload, nil)
		}
	})
}

func FuzzAckedPublish(f *testing.F) {
	f.Fuzz(func(t *testing.T, flags uint16, payload []byte) {
		if k, err := wire.KindFromFlags(wire.Flags(flags)); err == nil && k == wire.KindAckedPublishBatch {
			checkAckedPublish(t, wire.Flags(flags), payload, nil)
		}
	})
}

func FuzzPublishAck(f *testing.F) {
	f.Fuzz(func(t *testing.T, flags uint16, payload []byte) {
		if k, err := wire.KindFromFlags(wire.Flags(flags)); err == nil && k == wire.KindPublishAck {
			checkPublishAck(t, wire.Flags(flags), payload, nil)
		}
	})
}

func FuzzEventBatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, flags uint16, payload []byte) { checkEventBatch(t, wire.Flags(flags), payload, nil) })
}

// FuzzHeaderBlock: a block that parses re-encodes to exactly its bytes, and
// its length is what HeaderBlockLen says.
func FuzzHeaderBlock(f *testing.F) {
	f.Fuzz(func(t *testing.T, block []byte) {
		hs, err := wire.ParseHeaders(block)
		if err != nil {
			require.ErrorIs(t, err, wire.ErrBadHeaders)
			return
		}
		enc, err := wire.AppendHeaders(nil, hs)
		require.NoError(t, err)
		require.Equal(t, block, enc)
		n, err := wire.HeaderBlockLen(append(enc, 0xff))
		require.NoError(t, err)
		require.Equal(t, len(block), n)
	})
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
	enc, err := wire.AppendPublish(nil, &b)
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
	enc, err := wire.AppendAckedPublish(nil, &b)
	if b.Idempotent && err == nil && len(payload) > 8 {
		// The ack mode byte of an idempotent publish is not checked on
		// decode and always written as per_batch.
		payload = append([]byte(nil), payload...)
		payload[8] = byte(wire.AckPerBatch)
		if frame != nil {
			frame = append(append([]byte(nil), frame[:wire.HeaderLen]...), payload...)
		}
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
	if at := 11 + len(a.Message); a.Err != nil && (a.Err.Code == wire.CodeUnknown || payload[at+2] != byte(a.Err.Retry)) {
		// An unknown code decodes as CodeUnknown and an unknown retry
		// byte as Fatal, so such an ack re-encodes canonically.
		payload = append([]byte(nil), payload...)
		payload[at], payload[at+1], payload[at+2] = byte(a.Err.Code>>8), byte(a.Err.Code), byte(a.Err.Retry)
		frame = nil
	}
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
	var head wire.PublishOKHead
	if wire.DecodePublishOKHead(payload, &head) {
		require.NoError(t, err, "the fast path took what the decoder refuses")
		ok, isOK := m.(*wire.PublishOK)
		require.True(t, isOK)
		requireHeadIs(t, ok, head)
	}
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
