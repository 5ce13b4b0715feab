package wire_test

import (
	"testing"

	"github.com/felixmq/felix/wire"
)

func BenchmarkEncodePublishBatch64x4K(b *testing.B) {
	ps := payloads64x4K()
	buf, _ := wire.AppendPublishBatchFrame(nil, "tenant", "namespace", "stream", ps)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = wire.AppendPublishBatchFrame(buf[:0], "tenant", "namespace", "stream", ps)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePublishBatch64x4K(b *testing.B) {
	frame, _ := wire.AppendPublishBatchFrame(nil, "tenant", "namespace", "stream", payloads64x4K())
	payload := frame[wire.HeaderLen:]
	var into wire.PublishBatch
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := wire.DecodePublishBatch(payload, &into); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeEventBatch64x4K(b *testing.B) {
	e := wire.EventBatch{Shared: true, HasBaseOffset: true, BaseOffset: 1000, Payloads: payloads64x4K()}
	buf, _ := wire.AppendEventBatchFrame(nil, e)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = wire.AppendEventBatchFrame(buf[:0], e)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEventBatch64x4K(b *testing.B) {
	frame, _ := wire.AppendEventBatchFrame(nil, wire.EventBatch{Shared: true, HasBaseOffset: true, Payloads: payloads64x4K()})
	var into wire.EventBatch
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		h, payload, _, err := wire.SplitFrame(frame, 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := wire.DecodeEventBatch(h.Flags, payload, &into); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeEventBatch64x16B is the small-event case, where per-payload
// overhead rather than memory bandwidth dominates.
func BenchmarkDecodeEventBatch64x16B(b *testing.B) {
	ps := make([][]byte, 64)
	for i := range ps {
		ps[i] = make([]byte, 16)
	}
	frame, _ := wire.AppendEventBatchFrame(nil, wire.EventBatch{Shared: true, Payloads: ps})
	var into wire.EventBatch
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := wire.DecodeEventBatch(wire.FlagBinaryEventBatchShared, frame[wire.HeaderLen:], &into); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeJSONPublish(b *testing.B) {
	id := uint64(7)
	ack := wire.AckPerMessage
	m := &wire.Publish{TenantID: "tenant", Namespace: "namespace", Stream: "stream", Payload: make([]byte, 256), RequestID: &id, Ack: &ack}
	buf := wire.AppendJSONFrame(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = wire.AppendJSONFrame(buf[:0], m)
	}
}

func BenchmarkDecodeJSONPublish(b *testing.B) {
	id := uint64(7)
	ack := wire.AckPerMessage
	benchDecodeJSON(b, &wire.Publish{TenantID: "tenant", Namespace: "namespace", Stream: "stream", Payload: make([]byte, 256), RequestID: &id, Ack: &ack})
}

// BenchmarkDecodeJSONQueueMessage4K: a queue delivery of 4 KiB, whose
// base64 payload is most of the message (the client's share of a drain).
func BenchmarkDecodeJSONQueueMessage4K(b *testing.B) {
	benchDecodeJSON(b, &wire.QueueMessage{Shard: 1, Offset: 123456, Payload: make([]byte, 4096)})
}

func benchDecodeJSON(b *testing.B, m wire.Message) {
	payload := m.AppendJSON(nil)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.DecodeJSON(payload); err != nil {
			b.Fatal(err)
		}
	}
}
