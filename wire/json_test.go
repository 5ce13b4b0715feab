package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

func u64p(v uint64) *uint64 { return &v }
func u16p(v uint16) *uint16 { return &v }
func u32p(v uint32) *uint32 { return &v }
func strp(v string) *string { return &v }
func boolp(v bool) *bool    { return &v }

func ackp(m wire.AckMode) *wire.AckMode { return &m }

// allMessages has at least one value of every message type, with and
// without optional fields.
func allMessages() []wire.Message {
	return []wire.Message{
		&wire.Auth{TenantID: "t1", Token: "tok"},
		&wire.Auth{TenantID: "t1", Token: "tok", ClientFlags: u16p(0x3F)},
		&wire.AuthOK{ServerFlags: 0x3F},
		&wire.Publish{TenantID: "t", Namespace: "n", Stream: "s", Payload: []byte{0, 1, 2}},
		&wire.Publish{TenantID: "t", Namespace: "n", Stream: "s", Payload: []byte("x"), RequestID: u64p(1<<64 - 1), Ack: ackp(wire.AckNone)},
		&wire.PublishBatchMessage{TenantID: "t", Namespace: "n", Stream: "s", Payloads: [][]byte{[]byte("a"), {0xff}}},
		&wire.PublishBatchMessage{TenantID: "t", Namespace: "n", Stream: "s", Payloads: [][]byte{[]byte("a")}, RequestID: u64p(3), Ack: ackp(wire.AckPerBatch)},
		&wire.Subscribe{TenantID: "t", Namespace: "n", Stream: "s"},
		&wire.Subscribe{TenantID: "t", Namespace: "n", Stream: "s", SubscriptionID: u64p(9), Start: &wire.Start{Kind: wire.StartLatest}},
		&wire.Subscribe{TenantID: "t", Namespace: "n", Stream: "s", Start: &wire.Start{Kind: wire.StartEarliest}},
		&wire.Subscribe{TenantID: "t", Namespace: "n", Stream: "s", Start: &wire.Start{Kind: wire.StartOffset, Offset: 12345}},
		&wire.Subscribed{SubscriptionID: 42},
		&wire.EventStreamHello{SubscriptionID: 42},
		&wire.Event{TenantID: "t", Namespace: "n", Stream: "s", Payload: []byte("p")},
		&wire.Event{TenantID: "t", Namespace: "n", Stream: "s", Payload: []byte("p"), Offset: u64p(0)},
		&wire.EventBatchMessage{TenantID: "t", Namespace: "n", Stream: "s", Payloads: [][]byte{[]byte("p")}},
		&wire.EventBatchMessage{TenantID: "t", Namespace: "n", Stream: "s", Payloads: [][]byte{[]byte("p"), []byte("q")}, BaseOffset: u64p(7)},
		&wire.CachePut{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: []byte("v")},
		&wire.CachePut{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: []byte("v"), RequestID: u64p(1), TTLMs: u64p(1000)},
		&wire.CacheGet{TenantID: "t", Namespace: "n", Cache: "c", Key: "k"},
		&wire.CacheGet{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", RequestID: u64p(2)},
		&wire.CacheValue{TenantID: "t", Namespace: "n", Cache: "c", Key: "k"},
		&wire.CacheValue{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Found: true, Value: []byte("v"), RequestID: u64p(2)},
		&wire.CacheOK{RequestID: 5},
		&wire.PublishOK{RequestID: 5},
		&wire.PublishError{RequestID: 5, Message: "stream not found"},
		&wire.OK{},
		&wire.ErrorMessage{Message: "oops"},
		&wire.SubscribeCursorError{Reason: wire.CursorTooOld, Requested: 1, Available: 10},
		&wire.SubscribeCursorError{Reason: wire.CursorInFuture, Requested: 99, Available: 10},
		&wire.SubscriptionGap{SubscriptionID: 4, Dropped: 17},
		&wire.Publish{TenantID: "t", Namespace: "n", Stream: "s", Payload: []byte("x"), Key: []byte("user-1")},
		&wire.PublishBatchMessage{TenantID: "t", Namespace: "n", Stream: "s", Payloads: [][]byte{[]byte("a")}, Key: []byte{}},
		&wire.Subscribe{TenantID: "t", Namespace: "n", Stream: "s", Shard: u32p(3)},
		&wire.CacheDelete{TenantID: "t", Namespace: "n", Cache: "c", Key: "k"},
		&wire.CacheDelete{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", RequestID: u64p(8)},
		&wire.CacheDeleted{Existed: true},
		&wire.CacheDeleted{RequestID: u64p(8)},
		&wire.CounterAdd{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Delta: -1 << 63, RequestID: u64p(1)},
		&wire.CounterAdd{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Delta: 5},
		&wire.CounterGet{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", RequestID: u64p(2)},
		&wire.CounterValue{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: 1<<63 - 1, RequestID: u64p(2)},
		&wire.CounterValue{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: -3},
		&wire.Watch{TenantID: "t", Namespace: "n", Cache: "c", Key: "k"},
		&wire.Watch{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Current: boolp(true)},
		&wire.CacheError{Code: wire.CacheErrNotFound, Message: "cache not found: t/n/c"},
		&wire.CacheError{RequestID: u64p(3), Code: wire.CacheErrValueTooLarge, Message: "too big"},
		&wire.RosterJoin{TenantID: "t", Namespace: "n", Roster: "r", Member: "m"},
		&wire.RosterJoin{TenantID: "t", Namespace: "n", Roster: "r", Member: "m", Metadata: []byte{}, RequestID: u64p(1)},
		&wire.RosterLeave{TenantID: "t", Namespace: "n", Roster: "r", Member: "m", RequestID: u64p(2)},
		&wire.RosterWatch{TenantID: "t", Namespace: "n", Roster: "r"},
		&wire.RosterOK{},
		&wire.RosterOK{RequestID: u64p(2)},
		&wire.RosterSnapshot{Members: []wire.RosterMember{}, Last: true},
		&wire.RosterSnapshot{Members: []wire.RosterMember{{Member: "a"}, {Member: "b", Metadata: []byte("{}")}}},
		&wire.RosterChange{Kind: wire.RosterJoined, Member: "a", Metadata: []byte{1}},
		&wire.RosterChange{Kind: wire.RosterLeft, Member: "a"},
		&wire.QueueConsume{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", Member: "m"},
		&wire.QueueConsume{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", Member: "m", MaxInflight: u64p(8), VisibilityTimeoutMs: u64p(500)},
		&wire.QueueMessage{Offset: 7, Redeliveries: 1, Payload: []byte{}},
		&wire.QueueAck{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", Offsets: []uint64{}},
		&wire.QueueAck{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", Offsets: []uint64{1, 1<<64 - 1}, RequestID: u64p(3)},
		&wire.QueueNack{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", Offsets: []uint64{4}},
		&wire.QueueMessage{Shard: 1<<32 - 1, Offset: 7, Payload: []byte{}},
		&wire.QueueAck{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", Shard: u32p(3), Offsets: []uint64{5}, RequestID: u64p(4)},
		&wire.QueueAck{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", Shard: u32p(0), Offsets: []uint64{5}},
		&wire.QueueNack{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", Shard: u32p(1<<32 - 1), Offsets: []uint64{4}},
		&wire.QueueOK{RequestID: 3},
		&wire.QueueError{RequestID: 3, Message: "offset 9 was never delivered"},
	}
}

func TestJSONRoundTrip(t *testing.T) {
	seen := map[wire.MessageType]bool{}
	for _, m := range allMessages() {
		seen[m.Type()] = true
		enc := m.AppendJSON(nil)
		t.Run(string(enc), func(t *testing.T) {
			require.True(t, json.Valid(enc))
			got, err := wire.DecodeJSON(enc)
			require.NoError(t, err)
			require.Equal(t, m, got)

			frame := wire.AppendJSONFrame([]byte("prefix"), m)
			h, payload, rest, err := wire.SplitFrame(frame[len("prefix"):], 0)
			require.NoError(t, err)
			require.Equal(t, wire.Header{Length: uint32(len(enc))}, h)
			require.Equal(t, enc, payload)
			require.Empty(t, rest)
		})
	}
	for typ := wire.TypeAuth; typ <= wire.TypeQueueError; typ++ {
		require.True(t, seen[typ], "no round-trip case for %s", typ)
	}
}

func TestJSONEscaping(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`plain`, `"plain"`},
		{`q"b\`, `"q\"b\\"`},
		{"\n\r\t\b\f", `"\n\r\t\b\f"`},
		{"\x00\x01\x0b\x1f", `"\u0000\u0001\u000b\u001f"`},
		{"\x1a", `"\u001a"`},
		{"\x7f", "\"\x7f\""},
		{`<>&/'`, `"<>&/'"`},
		{"é€😀\u2028", "\"é€😀\u2028\""},
		{"a\xffb", "\"a\ufffdb\""},
	}
	for _, tt := range tests {
		got := (&wire.ErrorMessage{Message: tt.in}).AppendJSON(nil)
		require.Equal(t, `{"type":"error","message":`+tt.want+`}`, string(got), "%q", tt.in)
		require.True(t, json.Valid(got))
		if tt.in != "a\xffb" {
			m, err := wire.DecodeJSON(got)
			require.NoError(t, err)
			require.Equal(t, tt.in, m.(*wire.ErrorMessage).Message)
		}
	}
}

func TestJSONEncodingRules(t *testing.T) {
	tests := []struct {
		m    wire.Message
		want string
	}{
		{&wire.CachePut{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: nil},
			`{"type":"cache_put","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"","ttl_ms":null}`},
		{&wire.CacheValue{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: []byte("ignored")},
			`{"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":null}`},
		{&wire.CacheValue{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Found: true},
			`{"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":""}`},
		{&wire.Publish{TenantID: "t", Namespace: "n", Stream: "s", Payload: []byte{0xfb, 0xff}, RequestID: u64p(0), Ack: ackp(wire.AckPerMessage)},
			`{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"+/8=","request_id":0,"ack":"per_message"}`},
		{&wire.PublishBatchMessage{TenantID: "t", Namespace: "n", Stream: "s"},
			`{"type":"publish_batch","tenant_id":"t","namespace":"n","stream":"s","payloads":[]}`},
		{&wire.Subscribe{TenantID: "t", Namespace: "n", Stream: "s", Start: &wire.Start{Kind: wire.StartOffset}},
			`{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":{"offset":0}}`},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, string(tt.m.AppendJSON(nil)))
	}
}

func TestDecodeJSONLenient(t *testing.T) {
	tests := []struct {
		in   string
		want wire.Message
	}{
		{`{"type":"ok","extra":[1,{"x":null}]}`, &wire.OK{}},
		{` { "server_flags" : 7 , "type" : "auth_ok" } `, &wire.AuthOK{ServerFlags: 7}},
		{`{"type":"auth","tenant_id":"t","token":"x","client_flags":null}`, &wire.Auth{TenantID: "t", Token: "x"}},
		{`{"type":"cache_put","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"dg=="}`,
			&wire.CachePut{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: []byte("v")}},
		{`{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":null}`,
			&wire.Subscribe{TenantID: "t", Namespace: "n", Stream: "s"}},
		{`{"type":"error","message":"\ud83d\ude00\u00e9\/"}`, &wire.ErrorMessage{Message: "😀é/"}},
		{`{"type":"error","message":"x","Message":"y"}`, &wire.ErrorMessage{Message: "x"}},
	}
	for _, tt := range tests {
		got, err := wire.DecodeJSON([]byte(tt.in))
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	tests := []struct {
		in  string
		err error
	}{
		{``, wire.ErrMalformedJSON},
		{`null`, wire.ErrMalformedJSON},
		{`[]`, wire.ErrMalformedJSON},
		{`{"type":"ok"`, wire.ErrMalformedJSON},
		{`{}`, wire.ErrMissingField},
		{`{"type":null}`, wire.ErrMissingField},
		{`{"type":5}`, wire.ErrMalformedJSON},
		{`{"type":"nope"}`, wire.ErrUnknownMessageType},
		{`{"type":"OK"}`, wire.ErrUnknownMessageType},
		{`{"type":"error","MESSAGE":"case matters"}`, wire.ErrMissingField},
		{`{"type":"publish_ok","request_id":-1}`, wire.ErrMalformedJSON},
		{`{"type":"publish_ok","request_id":1.5}`, wire.ErrMalformedJSON},
		{`{"type":"publish_ok","request_id":18446744073709551616}`, wire.ErrMalformedJSON},
		{`{"type":"publish_ok","request_id":"1"}`, wire.ErrMalformedJSON},
		{`{"type":"auth_ok","server_flags":65536}`, wire.ErrMalformedJSON},
		{`{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"dg"}`, wire.ErrMalformedJSON},
		{`{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"dh=="}`, wire.ErrMalformedJSON},
		{`{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"dg==\n"}`, wire.ErrMalformedJSON},
		{`{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"-_8="}`, wire.ErrMalformedJSON},
		{`{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"dg==","ack":"always"}`, wire.ErrMalformedJSON},
		{`{"type":"publish","tenant_id":"t","namespace":"n","stream":"s"}`, wire.ErrMissingField},
		{`{"type":"publish_batch","tenant_id":"t","namespace":"n","stream":"s","payloads":["dg==",null]}`, wire.ErrMalformedJSON},
		{`{"type":"publish_batch","tenant_id":"t","namespace":"n","stream":"s","payloads":"dg=="}`, wire.ErrMalformedJSON},
		{`{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":"oldest"}`, wire.ErrMalformedJSON},
		{`{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":{"offset":1,"x":2}}`, wire.ErrMalformedJSON},
		{`{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":{"offset":null}}`, wire.ErrMalformedJSON},
		{`{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":{}}`, wire.ErrMalformedJSON},
		{`{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":7}`, wire.ErrMalformedJSON},
		{`{"type":"subscribe_cursor_error","reason":"gone","requested":1,"available":2}`, wire.ErrMalformedJSON},
		{`{"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":5}`, wire.ErrMalformedJSON},
		{"{\"type\":\"error\",\"message\":\"\xff\"}", wire.ErrInvalidUTF8},
		{"{\"type\":\"error\",\"message\":\"\xed\xa0\x80\"}", wire.ErrInvalidUTF8},
		{`{"type":"error","message":"\ud800"}`, wire.ErrInvalidUTF8},
		{`{"type":"error","message":"\udc00\ud800"}`, wire.ErrInvalidUTF8},
		{`{"type":"error","message":"\ud800\u0041"}`, wire.ErrInvalidUTF8},
		{`{"type":"error","message":"\ud800x"}`, wire.ErrInvalidUTF8},
	}
	for _, tt := range tests {
		got, err := wire.DecodeJSON([]byte(tt.in))
		require.ErrorIs(t, err, tt.err, tt.in)
		require.Nil(t, got)
	}
}

func TestDecodeJSONErrorDetail(t *testing.T) {
	_, err := wire.DecodeJSON([]byte(`{"type":"cache_get","tenant_id":"t","namespace":"n"}`))
	var mf *wire.MissingFieldError
	require.ErrorAs(t, err, &mf)
	require.Equal(t, &wire.MissingFieldError{Type: "cache_get", Field: "cache"}, mf)

	_, err = wire.DecodeJSON([]byte(`{"type":"counter_mul"}`))
	var ut *wire.UnknownMessageTypeError
	require.ErrorAs(t, err, &ut)
	require.Equal(t, "counter_mul", ut.Type)

	_, err = wire.DecodeJSON([]byte(`{"type":"auth_ok","server_flags":-1}`))
	var mj *wire.MalformedJSONError
	require.ErrorAs(t, err, &mj)
	require.Equal(t, "server_flags", mj.Field)
}

func TestMessageTypeNames(t *testing.T) {
	for typ := wire.TypeAuth; typ <= wire.TypeQueueError; typ++ {
		got, ok := wire.ParseMessageType(typ.String())
		require.True(t, ok)
		require.Equal(t, typ, got)
	}
	_, ok := wire.ParseMessageType("MessageType(0)")
	require.False(t, ok)
}
