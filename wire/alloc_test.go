package wire_test

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

func payloads64x4K() [][]byte {
	out := make([][]byte, 64)
	for i := range out {
		out[i] = bytes.Repeat([]byte{byte(i)}, 4096)
	}
	return out
}

// TestDecodeSteadyStateNoAllocs: decoding into a reused struct allocates
// nothing once warm, for every binary layout.
func TestDecodeSteadyStateNoAllocs(t *testing.T) {
	ps := payloads64x4K()
	pub, err := wire.AppendPublishBatchFrame(nil, "tenant", "namespace", "stream", ps)
	require.NoError(t, err)
	acked, err := wire.AppendAckedPublishFrame(nil, 9, wire.AckPerBatch, "tenant", "namespace", "stream", ps)
	require.NoError(t, err)
	ack, err := wire.AppendPublishAckFrame(nil, wire.PublishAck{RequestID: 9})
	require.NoError(t, err)
	shared, err := wire.AppendEventBatchFrame(nil, wire.EventBatch{Shared: true, HasBaseOffset: true, Payloads: ps})
	require.NoError(t, err)
	legacy, err := wire.AppendEventBatchFrame(nil, wire.EventBatch{SubscriptionID: 3, Payloads: ps})
	require.NoError(t, err)

	var pb wire.PublishBatch
	var ap wire.AckedPublish
	var pa wire.PublishAck
	var eb wire.EventBatch
	tests := map[string]func() error{
		"publish batch": func() error { return wire.DecodePublishBatch(pub[wire.HeaderLen:], &pb) },
		"acked publish": func() error { return wire.DecodeAckedPublish(acked[wire.HeaderLen:], &ap) },
		"publish ack":   func() error { return wire.DecodePublishAck(ack[wire.HeaderLen:], &pa) },
		"shared events": func() error { return wire.DecodeEventBatch(0x24, shared[wire.HeaderLen:], &eb) },
		"legacy events": func() error { return wire.DecodeEventBatch(0x02, legacy[wire.HeaderLen:], &eb) },
		"split frame": func() error {
			_, _, _, err := wire.SplitFrame(pub, 0)
			return err
		},
	}
	for name, decode := range tests {
		require.NoError(t, decode(), name) // warm up
		allocs := testing.AllocsPerRun(100, func() {
			if err := decode(); err != nil {
				panic(err)
			}
		})
		require.Zero(t, allocs, name)
	}
	require.Len(t, pb.Payloads, 64)
}

// allocatedBytes reports the bytes f allocates, averaged over runs.
func allocatedBytes(runs int, f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// TestDecodeAllocationBound: a decoder never allocates more than a small
// multiple of the frame (6 slice-header bytes per frame byte at worst, for
// a frame of empty payloads), and a count claim in a tiny frame allocates
// nothing for the payload list.
func TestDecodeAllocationBound(t *testing.T) {
	bomb := []byte{0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	got := allocatedBytes(100, func() {
		var into wire.PublishBatch
		_ = wire.DecodePublishBatch(bomb, &into)
	})
	require.Less(t, got, uint64(256), "count bomb must fail before allocating")

	shared := binary.BigEndian.AppendUint32(nil, 1<<32-1)
	got = allocatedBytes(100, func() {
		var into wire.EventBatch
		_ = wire.DecodeEventBatch(wire.FlagBinaryEventBatchShared, shared, &into)
	})
	require.Less(t, got, uint64(256))

	// Worst honest case: 1 Mi empty payloads in a 4 MiB frame.
	const n = 1 << 20
	body := binary.BigEndian.AppendUint32(nil, n)
	body = append(body, make([]byte, 4*n)...)
	got = allocatedBytes(3, func() {
		var into wire.EventBatch
		if err := wire.DecodeEventBatch(wire.FlagBinaryEventBatchShared, body, &into); err != nil {
			panic(err)
		}
	})
	require.LessOrEqual(t, got, uint64(6*len(body)+4096))
}
