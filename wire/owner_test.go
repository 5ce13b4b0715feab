package wire_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

// Golden frames of the cluster additions (docs/protocol.md "Cluster"),
// written from the layout, not from the encoder.
var (
	ownerAckHex = strings.Join([]string{
		"464c5831", "0001", "0410", "00000023", // header: flags 0x0410, 35 bytes
		"00", "0000000000000007", "0000", // v1 ack: ok, id 7, no message
		"00000003", "0002", "6232", "000e", "3132372e302e302e313a35303032", // shard 3, "b2", "127.0.0.1:5002"
	}, "")
	shardPublishHex = strings.Join([]string{
		"464c5831", "0001", "0801", "00000024",
		"00000003",                                                   // shard 3
		"0002", "7431", "0007", "64656661756c74", "0004", "64656d6f", // t1/default/demo
		"00000001", "00000005", "68656c6c6f", // ["hello"]
	}, "")
	shardAckedPublishHex = strings.Join([]string{
		"464c5831", "0001", "0809", "0000002d",
		"0000000000000007", "02", "00000003", // request 7, per_batch, shard 3
		"0002", "7431", "0007", "64656661756c74", "0004", "64656d6f",
		"00000001", "00000005", "68656c6c6f",
	}, "")
)

var owner3 = wire.Owner{Shard: 3, ID: "b2", Addr: "127.0.0.1:5002"}

func TestClusterBinaryVectors(t *testing.T) {
	frame, err := wire.AppendPublishAckFrame(nil, wire.PublishAck{Status: wire.AckOK, RequestID: 7, Owner: owner3, HasOwner: true})
	require.NoError(t, err)
	require.Equal(t, ownerAckHex, hex.EncodeToString(frame))
	h, payload, _, err := wire.SplitFrame(frame, 0)
	require.NoError(t, err)
	require.Equal(t, wire.KindPublishAck, h.Kind())
	var ack wire.PublishAck
	require.NoError(t, wire.DecodePublishAckFlags(h.Flags, payload, &ack))
	require.Equal(t, wire.PublishAck{Status: wire.AckOK, RequestID: 7, Owner: owner3, HasOwner: true}, ack)
	// A v1 decoder refuses the trailer instead of misreading it.
	require.ErrorIs(t, wire.DecodePublishAck(payload, &ack), wire.ErrTrailingBytes)

	payloads := [][]byte{[]byte("hello")}
	frame, err = wire.AppendShardPublishBatchFrame(nil, 3, "t1", "default", "demo", payloads)
	require.NoError(t, err)
	require.Equal(t, shardPublishHex, hex.EncodeToString(frame))
	h, payload, _, err = wire.SplitFrame(frame, 0)
	require.NoError(t, err)
	require.Equal(t, wire.KindPublishBatch, h.Kind())
	var b wire.PublishBatch
	require.NoError(t, wire.DecodePublishBatchFlags(h.Flags, payload, &b))
	require.Equal(t, wire.PublishBatch{TenantID: "t1", Namespace: "default", Stream: "demo", Payloads: payloads, Shard: 3, HasShard: true}, b)

	frame, err = wire.AppendShardAckedPublishFrame(nil, 7, wire.AckPerBatch, 3, "t1", "default", "demo", payloads)
	require.NoError(t, err)
	require.Equal(t, shardAckedPublishHex, hex.EncodeToString(frame))
	h, payload, _, err = wire.SplitFrame(frame, 0)
	require.NoError(t, err)
	require.Equal(t, wire.KindAckedPublishBatch, h.Kind())
	var ap wire.AckedPublish
	require.NoError(t, wire.DecodeAckedPublishFlags(h.Flags, payload, &ap))
	require.Equal(t, uint64(7), ap.RequestID)
	require.Equal(t, uint32(3), ap.Shard)
	require.True(t, ap.HasShard)

	// Without the modifiers, frames stay byte-identical to wire v1.
	frame, err = wire.AppendPublishAckFrame(nil, wire.PublishAck{Status: wire.AckOK, RequestID: 7})
	require.NoError(t, err)
	require.Equal(t, "464c5831000100100000000b0000000000000000070000", hex.EncodeToString(frame))
}

func TestClusterJSONVectors(t *testing.T) {
	for _, c := range []struct {
		m    wire.Message
		json string
	}{
		{&wire.PublishOK{RequestID: 7, Owner: &owner3},
			`{"type":"publish_ok","request_id":7,"shard":3,"owner_id":"b2","owner_addr":"127.0.0.1:5002"}`},
		{&wire.PublishError{RequestID: 9, Message: "owner_unavailable: t1/default/demo#3", Owner: &owner3},
			`{"type":"publish_error","request_id":9,"message":"owner_unavailable: t1/default/demo#3","shard":3,"owner_id":"b2","owner_addr":"127.0.0.1:5002"}`},
		{&wire.ErrorMessage{Message: "not_owner", Owner: &owner3},
			`{"type":"error","message":"not_owner","shard":3,"owner_id":"b2","owner_addr":"127.0.0.1:5002"}`},
		{&wire.Publish{TenantID: "t1", Namespace: "default", Stream: "demo", Payload: []byte("hello"),
			RequestID: u64p(7), Ack: ackp(wire.AckPerMessage), Shard: u32p(3)},
			`{"type":"publish","tenant_id":"t1","namespace":"default","stream":"demo","payload":"aGVsbG8=","request_id":7,"ack":"per_message","shard":3}`},
		{&wire.PublishBatchMessage{TenantID: "t1", Namespace: "default", Stream: "demo", Payloads: bytesList("a"),
			Ack: ackp(wire.AckNone), Shard: u32p(0)},
			`{"type":"publish_batch","tenant_id":"t1","namespace":"default","stream":"demo","payloads":["YQ=="],"ack":"none","shard":0}`},
		// Without an owner, v1 bytes.
		{&wire.PublishOK{RequestID: 7}, `{"type":"publish_ok","request_id":7}`},
	} {
		require.Equal(t, c.json, string(c.m.AppendJSON(nil)))
		got, err := wire.DecodeJSON([]byte(c.json))
		require.NoError(t, err)
		require.Equal(t, c.m, got)
	}
}
