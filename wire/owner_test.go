package wire_test

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

var owner3 = wire.Owner{ID: "b2", Addr: "127.0.0.1:5002"}

// TestAckTrailersRoundTrip puts every ack modifier on one frame: the
// fields come back, and a decoder that was not told the flags refuses the
// trailers instead of misreading them.
func TestAckTrailersRoundTrip(t *testing.T) {
	for _, ack := range []wire.PublishAck{
		{Status: wire.AckOK, RequestID: 7, HasOwner: true, Owner: wire.Owner{ID: "b2", Addr: "127.0.0.1:5002", Generation: 9},
			Offset: 1 << 40, HasOffset: true, Shard: 3, HasShard: true},
		{Status: wire.AckError, RequestID: 8, Message: "shard is moving", HasDetail: true,
			Err:      &wire.TypedError{Code: wire.CodeShardUnavailable, Retry: wire.Retry, Reason: "moving", RetryAfterMs: 500},
			HasOwner: true, Owner: wire.Owner{ID: "b2"}, Shard: 1, HasShard: true},
		{Status: wire.AckError, RequestID: 9, Message: "no", Err: &wire.TypedError{Code: wire.CodeForbidden, Retry: wire.Fatal}},
	} {
		frame, err := wire.AppendPublishAckFrame(nil, ack)
		require.NoError(t, err)
		h, payload, _, err := wire.SplitFrame(frame, 0)
		require.NoError(t, err)
		require.Equal(t, wire.KindPublishAck, h.Kind())
		require.Equal(t, ack.Flags(), h.Flags)
		var got wire.PublishAck
		require.NoError(t, wire.DecodePublishAckFlags(h.Flags, payload, &got))
		require.Equal(t, ack, got)
		require.ErrorIs(t, wire.DecodePublishAck(payload, &got), wire.ErrTrailingBytes)
	}
	_, err := wire.AppendPublishAckFrame(nil, wire.PublishAck{Status: wire.AckError, RequestID: 1, Offset: 2, HasOffset: true})
	require.ErrorIs(t, err, wire.ErrInvalidFlags, "an offset only on success")
	// Without modifiers, frames stay byte-identical to wire v1.
	frame, err := wire.AppendPublishAckFrame(nil, wire.PublishAck{Status: wire.AckOK, RequestID: 7})
	require.NoError(t, err)
	require.Equal(t, "464c5831000100100000000b0000000000000000070000", hex.EncodeToString(frame))
}

func TestPublishModifiersRoundTrip(t *testing.T) {
	body := wire.PublishBatch{TenantID: "t1", Namespace: "default", Stream: "demo", Payloads: bytesList("a", "bc")}
	keyed, shard, empty := body, body, body
	keyed.Key, keyed.HasKey = []byte{0, 0xff}, true
	shard.Shard, shard.HasShard = 1023, true
	empty.Key, empty.HasKey = []byte{}, true
	for _, p := range []wire.AckedPublish{
		{RequestID: 1, Mode: wire.AckPerMessage, PublishBatch: keyed},
		{RequestID: 2, Mode: wire.AckPerBatch, PublishBatch: shard},
		{RequestID: 3, Idempotent: true, Mode: wire.AckPerBatch, ProducerID: 1<<63 + 5, Sequence: 77, PublishBatch: shard},
		{RequestID: 4, Idempotent: true, Mode: wire.AckPerBatch, ProducerID: 1, PublishBatch: empty},
	} {
		frame, err := wire.AppendAckedPublish(nil, &p)
		require.NoError(t, err)
		h, payload, _, err := wire.SplitFrame(frame, 0)
		require.NoError(t, err)
		require.Equal(t, wire.KindAckedPublishBatch, h.Kind())
		var got wire.AckedPublish
		require.NoError(t, wire.DecodeAckedPublishFlags(h.Flags, payload, &got))
		require.Equal(t, p, got)

		frame, err = wire.AppendPublish(nil, &p.PublishBatch)
		require.NoError(t, err)
		h, payload, _, err = wire.SplitFrame(frame, 0)
		require.NoError(t, err)
		require.Equal(t, wire.KindPublishBatch, h.Kind())
		var b wire.PublishBatch
		require.NoError(t, wire.DecodePublishBatchFlags(h.Flags, payload, &b))
		require.Equal(t, p.PublishBatch, b)
	}
	both := keyed
	both.Shard, both.HasShard = 1, true
	_, err := wire.AppendPublish(nil, &both)
	require.ErrorIs(t, err, wire.ErrInvalidFlags, "a key or a shard, not both")
}

func TestOwnerJSON(t *testing.T) {
	for _, c := range []struct {
		m    wire.Message
		json string
	}{
		{&wire.PublishOK{RequestID: 7, Shard: u32p(3), Owner: &owner3},
			`{"type":"publish_ok","request_id":7,"shard":3,"owner_id":"b2","owner_addr":"127.0.0.1:5002"}`},
		{&wire.PublishOK{RequestID: 7, Offset: u64p(9), Shard: u32p(0), Owner: &wire.Owner{ID: "b", Generation: 12}},
			`{"type":"publish_ok","request_id":7,"offset":9,"shard":0,"owner_id":"b","owner_addr":"","owner_generation":12}`},
		{&wire.PublishError{RequestID: 9, Message: "owner_unavailable: t1/default/demo#3", Err: wire.NewTypedError(wire.CodeShardUnavailable),
			Shard: u32p(3), Owner: &owner3},
			`{"type":"publish_error","request_id":9,"message":"owner_unavailable: t1/default/demo#3","code":"shard_unavailable","retry":"retry","shard":3,"owner_id":"b2","owner_addr":"127.0.0.1:5002"}`},
		{&wire.ErrorMessage{Message: "not_owner", Err: &wire.TypedError{Code: wire.CodeNotLeader, Retry: wire.Redirect, RetryAfterMs: 5},
			Shard: u32p(3), Owner: &owner3},
			`{"type":"error","message":"not_owner","code":"not_leader","retry":"redirect","detail":{"retry_after_ms":5},"shard":3,"owner_id":"b2","owner_addr":"127.0.0.1:5002"}`},
		{&wire.Publish{TenantID: "t1", Namespace: "default", Stream: "demo", Payload: []byte("hello"),
			RequestID: u64p(7), Ack: ackp(wire.AckPerMessage), Shard: u32p(3)},
			`{"type":"publish","tenant_id":"t1","namespace":"default","stream":"demo","payload":"aGVsbG8=","request_id":7,"ack":"per_message","shard":3}`},
		{&wire.PublishOK{RequestID: 7}, `{"type":"publish_ok","request_id":7}`},
	} {
		require.Equal(t, c.json, string(c.m.AppendJSON(nil)))
		got, err := wire.DecodeJSON([]byte(c.json))
		require.NoError(t, err)
		require.Equal(t, c.m, got)
	}
}

func TestTypedErrorCodes(t *testing.T) {
	for c := wire.CodeUnauthenticated; c <= wire.CodeStaleClaim; c++ {
		got, ok := wire.ParseErrorCode(c.String())
		require.True(t, ok, c.String())
		require.Equal(t, c, got)
		require.NotEqual(t, wire.RetryUnknown, c.DefaultRetry(), c.String())
	}
	require.Equal(t, wire.Redirect, wire.CodeNotLeader.DefaultRetry())
	require.Equal(t, wire.OutcomeUnknown, wire.CodeQuorumTimeout.DefaultRetry())
	require.Equal(t, wire.OutcomeUnknown, wire.CodeLeadershipLost.DefaultRetry())
	// An unknown code keeps its retry class; an unknown class reads fatal.
	m, err := wire.DecodeJSON([]byte(`{"type":"error","message":"m","code":"from_the_future","retry":"retry_after"}`))
	require.NoError(t, err)
	require.Equal(t, &wire.TypedError{Code: wire.CodeUnknown, Retry: wire.RetryAfter}, m.(*wire.ErrorMessage).Err)
	m, err = wire.DecodeJSON([]byte(`{"type":"error","message":"m","code":"not_found","retry":"sometimes"}`))
	require.NoError(t, err)
	require.Equal(t, wire.Fatal, m.(*wire.ErrorMessage).Err.Retry)
	m, err = wire.DecodeJSON([]byte(`{"type":"error","message":"m","code":"not_found"}`))
	require.NoError(t, err)
	require.Equal(t, wire.RetryAfter, m.(*wire.ErrorMessage).Err.Retry, "absent retry: the code's default")
	// The same in a binary ack: code 99, retry byte 9.
	frame, _ := hex.DecodeString("464c5831000102100000000e01000000000000000900000063" + "09")
	h, payload, _, err := wire.SplitFrame(frame, 0)
	require.NoError(t, err)
	var ack wire.PublishAck
	require.NoError(t, wire.DecodePublishAckFlags(h.Flags, payload, &ack))
	require.Equal(t, &wire.TypedError{Code: wire.CodeUnknown, Retry: wire.Fatal}, ack.Err)
}

func TestRefusalReasons(t *testing.T) {
	for _, js := range []string{
		`{"type":"publish_refused","request_id":1,"reason":{"offset_mismatch":{"tail":12}},"message":"m"}`,
		`{"type":"publish_refused","request_id":1,"reason":{"not_leader":{"node_id":"n"}},"message":"m"}`,
		`{"type":"publish_refused","request_id":1,"reason":"something_new","message":"m"}`,
	} {
		m, err := wire.DecodeJSON([]byte(js))
		require.NoError(t, err, js)
		require.Equal(t, js, string(m.AppendJSON(nil)))
	}
	_, err := wire.DecodeJSON([]byte(`{"type":"publish_refused","request_id":1,"reason":{"sequence_gap":{}},"message":"m"}`))
	require.ErrorIs(t, err, wire.ErrMissingField)
	_, err = wire.DecodeJSON([]byte(`{"type":"publish_refused","request_id":1,"reason":{"a":1,"b":2},"message":"m"}`))
	require.ErrorIs(t, err, wire.ErrMalformedJSON)
}
