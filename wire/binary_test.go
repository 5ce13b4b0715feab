package wire_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

func bytesList(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func TestPublishBatchRoundTrip(t *testing.T) {
	tests := []wire.PublishBatch{
		{TenantID: "t1", Namespace: "default", Stream: "demo", Payloads: bytesList("hello", "", "world")},
		{TenantID: "", Namespace: "", Stream: "", Payloads: bytesList("x")},
		{TenantID: "tê", Namespace: "名前", Stream: strings.Repeat("s", 65535), Payloads: bytesList("\x00\xff")},
	}
	for _, want := range tests {
		frame, err := wire.AppendPublishBatchFrame(nil, want.TenantID, want.Namespace, want.Stream, want.Payloads)
		require.NoError(t, err)
		h, payload, rest, err := wire.SplitFrame(frame, 0)
		require.NoError(t, err)
		require.Empty(t, rest)
		require.Equal(t, wire.KindPublishBatch, h.Kind())
		var got wire.PublishBatch
		require.NoError(t, wire.DecodePublishBatch(payload, &got))
		require.Equal(t, want, got)

		frame, err = wire.AppendAckedPublishFrame(nil, 77, wire.AckPerBatch, want.TenantID, want.Namespace, want.Stream, want.Payloads)
		require.NoError(t, err)
		h, payload, _, err = wire.SplitFrame(frame, 0)
		require.NoError(t, err)
		require.Equal(t, wire.KindAckedPublishBatch, h.Kind())
		var acked wire.AckedPublish
		require.NoError(t, wire.DecodeAckedPublish(payload, &acked))
		require.Equal(t, wire.AckedPublish{RequestID: 77, Mode: wire.AckPerBatch, PublishBatch: want}, acked)
	}
}

func TestDecodedPayloadsAliasAndAreCapped(t *testing.T) {
	frame, err := wire.AppendPublishBatchFrame(nil, "t", "n", "s", bytesList("ab", "cd"))
	require.NoError(t, err)
	var got wire.PublishBatch
	require.NoError(t, wire.DecodePublishBatch(frame[wire.HeaderLen:], &got))
	require.Equal(t, 2, cap(got.Payloads[0]), "append to one payload must not overwrite the next")
	frame[len(frame)-1] = 'X' // payloads alias the frame
	require.Equal(t, "cX", string(got.Payloads[1]))
}

func TestDecodeReusesInto(t *testing.T) {
	frame, err := wire.AppendPublishBatchFrame(nil, "t1", "ns", "s", bytesList("a", "b", "c"))
	require.NoError(t, err)
	into := wire.PublishBatch{Payloads: make([][]byte, 0, 8)}
	require.NoError(t, wire.DecodePublishBatch(frame[wire.HeaderLen:], &into))
	arr := &into.Payloads[:1][0]
	frame2, err := wire.AppendPublishBatchFrame(nil, "t2", "ns", "s", bytesList("d"))
	require.NoError(t, err)
	require.NoError(t, wire.DecodePublishBatch(frame2[wire.HeaderLen:], &into))
	require.Same(t, arr, &into.Payloads[0], "payloads array reused")
	require.Equal(t, wire.PublishBatch{TenantID: "t2", Namespace: "ns", Stream: "s", Payloads: bytesList("d")},
		wire.PublishBatch{TenantID: into.TenantID, Namespace: into.Namespace, Stream: into.Stream, Payloads: into.Payloads})
}

func publishBody(tenant, ns, stream []byte, tail ...byte) []byte {
	b := []byte{byte(len(tenant) >> 8), byte(len(tenant))}
	b = append(b, tenant...)
	b = append(b, byte(len(ns)>>8), byte(len(ns)))
	b = append(b, ns...)
	b = append(b, byte(len(stream)>>8), byte(len(stream)))
	b = append(b, stream...)
	return append(b, tail...)
}

func TestDecodePublishBatchErrors(t *testing.T) {
	tn := []byte("t")
	tests := []struct {
		name string
		in   []byte
		err  error
	}{
		{"empty", nil, wire.ErrTruncated},
		{"tenant length cut", []byte{0}, wire.ErrTruncated},
		{"tenant past end", []byte{0, 5, 't'}, wire.ErrTruncated},
		{"no namespace", []byte{0, 1, 't'}, wire.ErrTruncated},
		{"no count", publishBody(tn, tn, tn), wire.ErrTruncated},
		{"count cut", publishBody(tn, tn, tn, 0, 0), wire.ErrTruncated},
		{"count bomb", publishBody(tn, tn, tn, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0), wire.ErrCountTooLarge},
		{"count 2 in 4 bytes", publishBody(tn, tn, tn, 0, 0, 0, 2, 0, 0, 0, 0), wire.ErrCountTooLarge},
		{"payload length cut", publishBody(tn, tn, tn, 0, 0, 0, 1, 0, 0), wire.ErrCountTooLarge},
		{"payload past end", publishBody(tn, tn, tn, 0, 0, 0, 1, 0, 0, 0, 9, 'a'), wire.ErrTruncated},
		{"payload u32 max", publishBody(tn, tn, tn, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff), wire.ErrTruncated},
		{"second length cut", publishBody(tn, tn, tn, 0, 0, 0, 2, 0, 0, 0, 3, 'a', 'b', 'c', 0), wire.ErrTruncated},
		{"trailing", publishBody(tn, tn, tn, 0, 0, 0, 0, 0), wire.ErrTrailingBytes},
		{"bad utf8 tenant", publishBody([]byte{0xff}, tn, tn, 0, 0, 0, 0), wire.ErrInvalidUTF8},
		{"bad utf8 namespace", publishBody(tn, []byte{0xc3}, tn, 0, 0, 0, 0), wire.ErrInvalidUTF8},
		{"bad utf8 stream", publishBody(tn, tn, []byte{0xed, 0xa0, 0x80}, 0, 0, 0, 0), wire.ErrInvalidUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got wire.PublishBatch
			require.ErrorIs(t, wire.DecodePublishBatch(tt.in, &got), tt.err)
		})
	}
}

func TestDecodeAckedPublishKeepsPrefix(t *testing.T) {
	prefix := []byte{0, 0, 0, 0, 0, 0, 0x30, 0x39, 1}
	var got wire.AckedPublish
	err := wire.DecodeAckedPublish(append(prefix, 0, 9, 'x'), &got)
	require.ErrorIs(t, err, wire.ErrTruncated)
	require.Equal(t, uint64(12345), got.RequestID, "request_id survives a malformed body")
	require.Equal(t, wire.AckPerMessage, got.Mode)

	for _, mode := range []byte{0, 3, 0xff} {
		bad := append([]byte{0, 0, 0, 0, 0, 0, 0, 7, mode}, publishBody(nil, nil, nil, 0, 0, 0, 0)...)
		err = wire.DecodeAckedPublish(bad, &got)
		require.ErrorIs(t, err, wire.ErrBadAckMode)
		require.Equal(t, uint64(7), got.RequestID)
	}
	require.ErrorIs(t, wire.DecodeAckedPublish([]byte{0, 0, 0}, &got), wire.ErrTruncated)
	require.ErrorIs(t, wire.DecodeAckedPublish(prefix[:8], &got), wire.ErrTruncated)
}

func TestPublishAck(t *testing.T) {
	for _, want := range []wire.PublishAck{
		{Status: wire.AckOK, RequestID: 7},
		{Status: wire.AckError, RequestID: 9, Message: "stream not found"},
		{Status: wire.AckError, RequestID: 1<<64 - 1, Message: strings.Repeat("é", 30000)},
	} {
		frame, err := wire.AppendPublishAckFrame(nil, want)
		require.NoError(t, err)
		h, payload, _, err := wire.SplitFrame(frame, 0)
		require.NoError(t, err)
		require.Equal(t, wire.KindPublishAck, h.Kind())
		var got wire.PublishAck
		require.NoError(t, wire.DecodePublishAck(payload, &got))
		require.Equal(t, want, got)
	}

	tests := []struct {
		name string
		in   []byte
		err  error
	}{
		{"empty", nil, wire.ErrTruncated},
		{"status 2", []byte{2, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0}, wire.ErrBadAckStatus},
		{"status 255", []byte{255, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0}, wire.ErrBadAckStatus},
		{"id cut", []byte{0, 0, 0, 0}, wire.ErrTruncated},
		{"no msg len", []byte{0, 0, 0, 0, 0, 0, 0, 0, 7}, wire.ErrTruncated},
		{"msg past end", []byte{1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 3, 'a'}, wire.ErrTruncated},
		{"msg bad utf8", []byte{1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 1, 0xff}, wire.ErrInvalidUTF8},
		{"trailing", []byte{0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0}, wire.ErrTrailingBytes},
	}
	for _, tt := range tests {
		var got wire.PublishAck
		require.ErrorIs(t, wire.DecodePublishAck(tt.in, &got), tt.err, tt.name)
	}
}

func TestEventBatchRoundTrip(t *testing.T) {
	for _, want := range []wire.EventBatch{
		{SubscriptionID: 42, Payloads: bytesList("a", "bc")},
		{SubscriptionID: 42, HasBaseOffset: true, BaseOffset: 100, Payloads: bytesList("a")},
		{Shared: true, Payloads: bytesList("hello")},
		{Shared: true, HasBaseOffset: true, BaseOffset: 1<<64 - 1, Payloads: bytesList("", "\x00")},
	} {
		frame, err := wire.AppendEventBatchFrame(nil, want)
		require.NoError(t, err)
		h, payload, _, err := wire.SplitFrame(frame, 0)
		require.NoError(t, err)
		require.Equal(t, want.Flags(), h.Flags)
		// into starts dirty: every field must be overwritten.
		got := wire.EventBatch{Shared: !want.Shared, SubscriptionID: 5, HasBaseOffset: !want.HasBaseOffset, BaseOffset: 6}
		require.NoError(t, wire.DecodeEventBatch(h.Flags, payload, &got))
		require.Equal(t, want, got)
	}
}

func TestDecodeEventBatchErrors(t *testing.T) {
	tests := []struct {
		name  string
		flags wire.Flags
		in    []byte
		err   error
	}{
		{"json flags", 0, nil, wire.ErrInvalidFlags},
		{"publish flags", wire.FlagBinaryPublishBatch, nil, wire.ErrInvalidFlags},
		{"unknown flags", 0x0804, nil, wire.ErrUnknownFlags},
		{"timestamp past end", wire.FlagBinaryEventBatchShared | wire.FlagEventTimestamps, []byte{0, 0, 0, 1, 0, 0, 0}, wire.ErrCountTooLarge},
		{"publisher past end", wire.FlagBinaryEventBatchShared | wire.FlagEventPublisher, []byte{3, 'a'}, wire.ErrTruncated},
		{"bad header block", wire.FlagBinaryEventBatchShared | wire.FlagHeaders, []byte{0, 0, 0, 1, 0xff, 0, 0, 0, 0}, wire.ErrBadHeaders},
		{"offsets alone", wire.FlagEventBatchOffsets, nil, wire.ErrInvalidFlags},
		{"legacy no id", wire.FlagBinaryEventBatch, []byte{0, 0, 0}, wire.ErrTruncated},
		{"legacy no offset", 0x22, make([]byte, 12), wire.ErrTruncated},
		{"shared no count", wire.FlagBinaryEventBatchShared, []byte{0}, wire.ErrTruncated},
		{"shared bomb", wire.FlagBinaryEventBatchShared, []byte{0xff, 0xff, 0xff, 0xff}, wire.ErrCountTooLarge},
		{"shared payload past end", wire.FlagBinaryEventBatchShared, []byte{0, 0, 0, 1, 0, 0, 0, 5, 'h', 'i'}, wire.ErrTruncated},
		{"shared trailing", wire.FlagBinaryEventBatchShared, []byte{0, 0, 0, 0, 1}, wire.ErrTrailingBytes},
	}
	for _, tt := range tests {
		var got wire.EventBatch
		require.ErrorIs(t, wire.DecodeEventBatch(tt.flags, tt.in, &got), tt.err, tt.name)
	}
}

func TestEncoderErrorsLeaveDstUnchanged(t *testing.T) {
	dst := []byte("keep")
	long := strings.Repeat("x", 65536)
	tests := []struct {
		name string
		run  func() ([]byte, error)
		err  error
	}{
		{"tenant too long", func() ([]byte, error) { return wire.AppendPublishBatchFrame(dst, long, "n", "s", nil) }, wire.ErrNameTooLong},
		{"namespace too long", func() ([]byte, error) { return wire.AppendPublishBatchFrame(dst, "t", long, "s", nil) }, wire.ErrNameTooLong},
		{"stream too long", func() ([]byte, error) {
			return wire.AppendAckedPublishFrame(dst, 1, wire.AckPerBatch, "t", "n", long, nil)
		}, wire.ErrNameTooLong},
		{"stream bad utf8", func() ([]byte, error) { return wire.AppendPublishBatchFrame(dst, "t", "n", "\xff", nil) }, wire.ErrInvalidUTF8},
		{"ack mode none", func() ([]byte, error) { return wire.AppendAckedPublishFrame(dst, 1, wire.AckNone, "t", "n", "s", nil) }, wire.ErrBadAckMode},
		{"ack mode 3", func() ([]byte, error) { return wire.AppendAckedPublishFrame(dst, 1, 3, "t", "n", "s", nil) }, wire.ErrBadAckMode},
		{"ack status 2", func() ([]byte, error) { return wire.AppendPublishAckFrame(dst, wire.PublishAck{Status: 2}) }, wire.ErrBadAckStatus},
		{"ack message too long", func() ([]byte, error) {
			return wire.AppendPublishAckFrame(dst, wire.PublishAck{Status: wire.AckError, Message: long})
		}, wire.ErrMessageTooLong},
		{"ack message bad utf8", func() ([]byte, error) {
			return wire.AppendPublishAckFrame(dst, wire.PublishAck{Status: wire.AckError, Message: "\xc3"})
		}, wire.ErrInvalidUTF8},
	}
	for _, tt := range tests {
		got, err := tt.run()
		require.ErrorIs(t, err, tt.err, tt.name)
		require.Equal(t, "keep", string(got), tt.name)
	}
}
