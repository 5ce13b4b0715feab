package wire_test

import (
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
	"github.com/felixmq/felix/wire/wirevector"
)

// vectorMessages is every JSON vector's message written as a Go literal, so
// the encoder is checked against the golden bytes without going through the
// decoder first.
var vectorMessages = map[string]wire.Message{
	"auth":                   &wire.Auth{TenantID: "t1", Token: "demo-token"},
	"auth_with_capabilities": &wire.Auth{TenantID: "t1", Token: "demo-token", ClientFlags: u16p(25)},
	"auth_ok":                &wire.AuthOK{ServerFlags: 25},
	"publish":                &wire.Publish{TenantID: "t1", Namespace: "default", Stream: "demo", Payload: []byte("hello")},
	"publish_acked": &wire.Publish{TenantID: "t1", Namespace: "default", Stream: "demo", Payload: []byte("hello"),
		RequestID: u64p(7), Ack: ackp(wire.AckPerMessage)},
	"publish_batch": &wire.PublishBatchMessage{TenantID: "t1", Namespace: "default", Stream: "demo",
		Payloads: bytesList("hello", "world"), Ack: ackp(wire.AckNone)},
	"publish_batch_acked": &wire.PublishBatchMessage{TenantID: "t1", Namespace: "default", Stream: "demo",
		Payloads: bytesList("a", "bc"), RequestID: u64p(8), Ack: ackp(wire.AckPerBatch)},
	"subscribe": &wire.Subscribe{TenantID: "t1", Namespace: "default", Stream: "demo"},
	"subscribe_start_latest": &wire.Subscribe{TenantID: "t1", Namespace: "default", Stream: "demo",
		Start: &wire.Start{Kind: wire.StartLatest}},
	"subscribe_start_earliest": &wire.Subscribe{TenantID: "t1", Namespace: "default", Stream: "demo",
		Start: &wire.Start{Kind: wire.StartEarliest}},
	"subscribe_start_offset": &wire.Subscribe{TenantID: "t1", Namespace: "default", Stream: "demo",
		SubscriptionID: u64p(5), Start: &wire.Start{Kind: wire.StartOffset, Offset: 42}},
	"subscribed":         &wire.Subscribed{SubscriptionID: 42},
	"event_stream_hello": &wire.EventStreamHello{SubscriptionID: 42},
	"event":              &wire.Event{TenantID: "t1", Namespace: "default", Stream: "demo", Payload: []byte("world")},
	"event_offset":       &wire.Event{TenantID: "t1", Namespace: "default", Stream: "demo", Payload: []byte("world"), Offset: u64p(3)},
	"event_batch": &wire.EventBatchMessage{TenantID: "t1", Namespace: "default", Stream: "demo",
		Payloads: bytesList("hello"), BaseOffset: u64p(100)},
	"cache_put": &wire.CachePut{TenantID: "t1", Namespace: "default", Cache: "primary", Key: "demo-key",
		Value: []byte("cached"), TTLMs: u64p(1000)},
	"cache_put_no_ttl": &wire.CachePut{TenantID: "t1", Namespace: "default", Cache: "primary", Key: "demo-key",
		Value: []byte("cached"), RequestID: u64p(4)},
	"cache_get": &wire.CacheGet{TenantID: "t1", Namespace: "default", Cache: "primary", Key: "demo-key"},
	"cache_get_request_id": &wire.CacheGet{TenantID: "t1", Namespace: "default", Cache: "primary", Key: "demo-key",
		RequestID: u64p(6)},
	"cache_value": &wire.CacheValue{TenantID: "t1", Namespace: "default", Cache: "primary", Key: "demo-key",
		Found: true, Value: []byte("cached")},
	"cache_value_miss": &wire.CacheValue{TenantID: "t1", Namespace: "default", Cache: "primary", Key: "demo-key",
		RequestID: u64p(5)},
	"cache_ok":               &wire.CacheOK{RequestID: 3},
	"publish_ok":             &wire.PublishOK{RequestID: 7},
	"publish_error":          &wire.PublishError{RequestID: 9, Message: "stream not found"},
	"ok":                     &wire.OK{},
	"error":                  &wire.ErrorMessage{Message: "oops"},
	"error_escapes":          &wire.ErrorMessage{Message: "q\"b\\n\nr\rt\tb\bf\f\x01\x1f\x7f<>&/é€😀"},
	"subscribe_cursor_error": &wire.SubscribeCursorError{Reason: wire.CursorTooOld, Requested: 5, Available: 10},
	"subscribe_cursor_error_in_future": &wire.SubscribeCursorError{Reason: wire.CursorInFuture, Requested: 99,
		Available: 12},
	// Felix-Go additions.
	"subscription_gap": &wire.SubscriptionGap{SubscriptionID: 42, Dropped: 17},
	"publish_key": &wire.Publish{TenantID: "t1", Namespace: "default", Stream: "demo", Payload: []byte("hello"),
		Key: []byte("user-1"), RequestID: u64p(7), Ack: ackp(wire.AckPerMessage)},
	"publish_batch_key": &wire.PublishBatchMessage{TenantID: "t1", Namespace: "default", Stream: "demo",
		Payloads: bytesList("a"), Key: []byte{}, RequestID: u64p(8), Ack: ackp(wire.AckPerBatch)},
	// Cluster additions (owner.go).
	"publish_ok_owner": &wire.PublishOK{RequestID: 7, Shard: u32p(3), Owner: &owner3},
	"publish_error_owner": &wire.PublishError{RequestID: 9,
		Message: "owner_unavailable: shard t1/default/demo#3: owner b2 (127.0.0.1:5002) is not live", Shard: u32p(3), Owner: &owner3},
	"error_not_owner": &wire.ErrorMessage{Message: "not_owner: shard t1/default/demo#3 is owned by b2 at 127.0.0.1:5002",
		Shard: u32p(3), Owner: &owner3},
	"publish_shard": &wire.Publish{TenantID: "t1", Namespace: "default", Stream: "demo", Payload: []byte("hello"),
		RequestID: u64p(7), Ack: ackp(wire.AckPerMessage), Shard: u32p(3)},
	"subscribe_shard": &wire.Subscribe{TenantID: "t1", Namespace: "default", Stream: "demo",
		Start: &wire.Start{Kind: wire.StartEarliest}, Shard: u32p(3)},
	"roster_join": &wire.RosterJoin{TenantID: "t1", Namespace: "default", Roster: "lobby", Member: "alice",
		Metadata: []byte(`{"x":1}`), RequestID: u64p(1)},
	"roster_leave": &wire.RosterLeave{TenantID: "t1", Namespace: "default", Roster: "lobby", Member: "alice", RequestID: u64p(2)},
	"roster_watch": &wire.RosterWatch{TenantID: "t1", Namespace: "default", Roster: "lobby"},
	"roster_ok":    &wire.RosterOK{RequestID: u64p(1)},
	"roster_snapshot": &wire.RosterSnapshot{Members: []wire.RosterMember{{Member: "alice", Metadata: []byte(`{"x":1}`)},
		{Member: "bob"}}, Last: true},
	"roster_change":       &wire.RosterChange{Kind: wire.RosterJoined, Member: "carol", Metadata: []byte("hi")},
	"roster_change_leave": &wire.RosterChange{Kind: wire.RosterLeft, Member: "bob"},
	"queue_consume": &wire.QueueConsume{TenantID: "t1", Namespace: "default", Stream: "jobs", Group: "workers", Member: "w1",
		MaxInflight: u64p(64), VisibilityTimeoutMs: u64p(30000)},
	"queue_message": &wire.QueueMessage{Shard: 2, Offset: 42, Redeliveries: 1, Payload: []byte("job")},
	"queue_ack": &wire.QueueAck{TenantID: "t1", Namespace: "default", Stream: "jobs", Group: "workers",
		Offsets: []uint64{40, 41, 42}, RequestID: u64p(9)},
	"queue_nack": &wire.QueueNack{TenantID: "t1", Namespace: "default", Stream: "jobs", Group: "workers", Offsets: []uint64{43}},
	"queue_ack_shard": &wire.QueueAck{TenantID: "t1", Namespace: "default", Stream: "jobs", Group: "workers", Shard: u32p(2),
		Offsets: []uint64{40, 41, 42}, RequestID: u64p(9)},
	"queue_nack_shard": &wire.QueueNack{TenantID: "t1", Namespace: "default", Stream: "jobs", Group: "workers", Shard: u32p(1),
		Offsets: []uint64{43}},
	"queue_ok":      &wire.QueueOK{RequestID: 9},
	"queue_error":   &wire.QueueError{RequestID: 9, Message: "queue: offset 99 was never delivered to group workers"},
	"cache_delete":  &wire.CacheDelete{TenantID: "t1", Namespace: "default", Cache: "demo", Key: "user-1", RequestID: u64p(5)},
	"cache_deleted": &wire.CacheDeleted{RequestID: u64p(5), Existed: true},
	"counter_add": &wire.CounterAdd{TenantID: "t1", Namespace: "default", Cache: "demo", Key: "hits", Delta: -3,
		RequestID: u64p(6)},
	"counter_get":   &wire.CounterGet{TenantID: "t1", Namespace: "default", Cache: "demo", Key: "hits", RequestID: u64p(7)},
	"counter_value": &wire.CounterValue{TenantID: "t1", Namespace: "default", Cache: "demo", Key: "hits", Value: 39, RequestID: u64p(7)},
	"watch":         &wire.Watch{TenantID: "t1", Namespace: "default", Cache: "demo", Key: "user-1", Current: boolp(true)},
	"cache_error":   &wire.CacheError{RequestID: u64p(8), Code: wire.CacheErrNotFound, Message: "cache not found: t1/default/nope"},
	// The published 0.6 additions, and ours beside them.
	"auth_features": &wire.Auth{TenantID: "t1", Token: "demo-token", ClientFlags: u16p(0x97ff), ClientFeatures: u32p(0x4a20),
		ClientCaps: u32p(0x23c0)},
	"auth_ok_extended_features": &wire.AuthOK{ServerFlags: 25, ServerFeatures: u32p(0x80000001), ServerFeaturesHi: u32p(1)},
	"auth_ok_features":          &wire.AuthOK{ServerFlags: 0x97ff, ServerFeatures: u32p(0x4a20), ServerCaps: u32p(0x33c0)},
	"producer_init":             &wire.ProducerInit{RequestID: 1},
	"producer_init_ok":          &wire.ProducerInitOK{RequestID: 1, ProducerID: 0x1122334455667788},
	"publish_idempotent": &wire.PublishIdempotent{TenantID: "t1", Namespace: "default", Stream: "demo",
		Payloads: bytesList("hello"), Key: []byte("k7"), RequestID: 7, ProducerID: 0x1122334455667788, Sequence: 3},
	"publish_idempotent_shard": &wire.PublishIdempotent{TenantID: "t1", Namespace: "default", Stream: "demo",
		Payloads: bytesList("hello"), RequestID: 7, ProducerID: 0x1122334455667788, Sequence: 3, Shard: u32p(2)},
	"publish_refused_sequence_gap": &wire.PublishRefused{RequestID: 7, Reason: wire.Refusal{Kind: wire.RefusedSequenceGap, Expected: 3},
		Message: "sequence 5 of producer 1234605616436508552 on shard 0: expected 3"},
	"publish_refused_unknown_producer": &wire.PublishRefused{RequestID: 7, Reason: wire.Refusal{Kind: wire.RefusedUnknownProducer},
		Message: "producer 1234605616436508552 is unknown on shard 0"},
	"publish_refused_sequence_expired": &wire.PublishRefused{RequestID: 7, Reason: wire.Refusal{Kind: wire.RefusedSequenceExpired},
		Message: "sequence 1 is older than the remembered window"},
	"publish_refused_sequence_reused": &wire.PublishRefused{RequestID: 7, Reason: wire.Refusal{Kind: wire.RefusedSequenceReused},
		Message: "sequence 3 was published with other data"},
	"publish_refused_not_leader": &wire.PublishRefused{RequestID: 7,
		Reason:  wire.Refusal{Kind: wire.RefusedNotLeader, NodeID: "b2", Addr: strp("127.0.0.1:5002")},
		Message: "not_owner: shard t1/default/demo#0 is owned by b2 at 127.0.0.1:5002"},
	"publish_ok_offset":       &wire.PublishOK{RequestID: 7, Offset: u64p(42)},
	"publish_ok_offset_shard": &wire.PublishOK{RequestID: 7, Offset: u64p(42), Shard: u32p(3)},
	"error_code": &wire.ErrorMessage{Message: "stream not found: tenant=t1 namespace=default stream=nope",
		Err: &wire.TypedError{Code: wire.CodeNotFound, Retry: wire.RetryAfter}},
	"publish_error_code_detail": &wire.PublishError{RequestID: 9, Message: "ingress overloaded: subscriber queue full",
		Err: &wire.TypedError{Code: wire.CodeOverloaded, Retry: wire.RetryAfter, Reason: "publish_queue_full", RetryAfterMs: 100}},
	"queue_error_code": &wire.QueueError{RequestID: 9, Message: "invalid request: queue: offset 99 was never delivered to group workers",
		Err: &wire.TypedError{Code: wire.CodeInvalidRequest, Retry: wire.Fatal}},
	"stream_shards":      &wire.StreamShards{TenantID: "t1", Namespace: "default", Stream: "demo", RequestID: 4},
	"stream_shards_view": &wire.StreamShardsView{Shards: 8, RequestID: 4, Routing: strp("jump_hash")},
	// Consumer groups, conditional cache writes and reads by time (the
	// published 0.6 messages; max_attempts and headers are ours).
	"group_poll": &wire.GroupPoll{GroupRef: jobs, MaxRecords: 10, WaitMs: 5000, RequestID: 11},
	"group_poll_consumer": &wire.GroupPoll{GroupRef: jobs, MaxRecords: 10, WaitMs: 0, RequestID: 12,
		Consumer: strp("worker-1"), Reclaim: boolp(true), VisibilityMs: u64p(60000), MaxAttempts: u32p(5)},
	"group_records": &wire.GroupRecords{RequestID: 11, Records: []wire.GroupRecord{
		{Offset: 40, Payload: []byte("job"), Attempts: 1},
		{Offset: 41, Payload: []byte("job2"), Attempts: 3, SkippedBefore: u64p(1), Publisher: strp("alice"),
			TimestampMicros: u64p(1767225600000000), Headers: []wire.EventHeader{{Key: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}}},
	"group_records_empty":    &wire.GroupRecords{RequestID: 13, Records: []wire.GroupRecord{}},
	"group_ack":              &wire.GroupAck{GroupRef: jobs, Offset: 40, RequestID: 14},
	"group_nack":             &wire.GroupNack{GroupRef: jobs, Offset: 41, RequestID: 15},
	"group_nack_delay":       &wire.GroupNack{GroupRef: jobs, Offset: 41, RequestID: 16, DelayMs: u64p(2000), Attempts: u64p(3)},
	"group_dead_letters":     &wire.GroupDeadLetters{GroupRef: jobs, RequestID: 17},
	"group_dead_letter_list": &wire.GroupDeadLetterList{Offsets: []uint64{41, 97}, RequestID: 17},
	"group_discard":          &wire.GroupDiscard{GroupOffsetOp: wire.GroupOffsetOp{GroupRef: jobs, Offset: 97, RequestID: 18}},
	"group_redrive":          &wire.GroupRedrive{GroupOffsetOp: wire.GroupOffsetOp{GroupRef: jobs, Offset: 41, RequestID: 19}},
	"group_dead_letter":      &wire.GroupDeadLetter{GroupOffsetOp: wire.GroupOffsetOp{GroupRef: jobs, Offset: 42, RequestID: 20}},
	"group_extend":           &wire.GroupExtend{GroupRef: jobs, Offset: 43, Attempts: 2, ExtendMs: 30000, RequestID: 21},
	"group_extended":         &wire.GroupExtended{VisibleMs: 30000, RequestID: 21},
	"group_seek": &wire.GroupSeek{GroupRef: jobs, Start: wire.Start{Kind: wire.StartOffset, Offset: 100},
		RequestID: 22},
	"group_seek_if_new": &wire.GroupSeek{GroupRef: jobs, Start: wire.Start{Kind: wire.StartLatest}, IfNew: boolp(true),
		RequestID: 23},
	"group_position": &wire.GroupPosition{Offset: 100, Moved: true, RequestID: 22},
	"group_describe": &wire.GroupDescribe{GroupRef: jobs, RequestID: 24},
	"group_info":     &wire.GroupInfo{Committed: u64p(40), Tail: 120, InFlight: 3, Owed: 1, DeadLetters: 2, RequestID: 24, MaxAttempts: u32p(5)},
	"group_info_new": &wire.GroupInfo{Tail: 120, RequestID: 25},
	"group_delete":   &wire.GroupDelete{GroupRef: jobs, RequestID: 26},
	"group_deleted":  &wire.GroupDeleted{Existed: true, RequestID: 26},
	"cache_put_if": &wire.CachePutIf{TenantID: "t1", Namespace: "default", Cache: "demo", Key: "lease",
		Value: []byte("owner-a"), TTLMs: u64p(10000), Condition: wire.Condition{Kind: wire.ConditionAbsent}, RequestID: 27},
	"cache_put_if_version": &wire.CachePutIf{TenantID: "t1", Namespace: "default", Cache: "demo", Key: "count",
		Value: []byte("8"), Condition: wire.Condition{Kind: wire.ConditionVersion, Version: 41}, RequestID: 28},
	"cache_delete_if": &wire.CacheDeleteIf{TenantID: "t1", Namespace: "default", Cache: "demo", Key: "lease",
		Version: 42, RequestID: 29},
	"cache_condition_result":         &wire.CacheConditionResult{Applied: true, Version: u64p(43), RequestID: 28},
	"cache_condition_result_refused": &wire.CacheConditionResult{Applied: false, RequestID: 27},
	"cache_value_version": &wire.CacheValue{TenantID: "t1", Namespace: "default", Cache: "demo", Key: "count",
		Found: true, Value: []byte("7"), RequestID: u64p(30), Version: u64p(41)},
	"offset_for_time": &wire.OffsetForTime{TenantID: "t1", Namespace: "default", Stream: "demo", Shard: 0,
		AtMicros: 1767225600000000, RequestID: 31},
	"offset_value":      &wire.OffsetValue{Offset: u64p(1234), RequestID: 31},
	"offset_value_none": &wire.OffsetValue{RequestID: 32},
	"queue_consume_max_attempts": &wire.QueueConsume{TenantID: "t1", Namespace: "default", Stream: "jobs", Group: "workers",
		Member: "w1", MaxAttempts: u32p(5)},
	"queue_message_headers": &wire.QueueMessage{Shard: 0, Offset: 42, Redeliveries: 0, Payload: []byte("job"),
		Headers: []wire.EventHeader{{Key: "content-type", Value: "text/plain"}, {Key: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}},
}

var jobs = wire.GroupRef{TenantID: "t1", Namespace: "default", Stream: "jobs", Shard: 0, Group: "workers"}

func loadVectors(t *testing.T) []wirevector.Vector {
	t.Helper()
	files, err := filepath.Glob("testdata/vectors/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := make([]wirevector.Vector, 0, len(files))
	for _, f := range files {
		v, err := wirevector.Load(f)
		require.NoError(t, err, f)
		out = append(out, v)
	}
	return out
}

// TestVectors is the conformance test against the published Felix's golden
// frames (and our additions in the same format).
func TestVectors(t *testing.T) {
	types := map[wire.MessageType]bool{}
	layouts := map[uint16]bool{}
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			require.NoError(t, wirevector.Check(v))
			if v.Error != "" {
				return
			}
			if v.PayloadJSON == nil {
				layouts[*v.Flags] = true
				return
			}
			m, ok := vectorMessages[v.Name]
			require.True(t, ok, "add a Go literal for vector %s", v.Name)
			types[m.Type()] = true
			require.Equal(t, *v.PayloadJSON, string(m.AppendJSON(nil)))
			require.Equal(t, v.FrameHex, hex.EncodeToString(wire.AppendJSONFrame(nil, m)))
			got, err := wire.DecodeJSON([]byte(*v.PayloadJSON))
			require.NoError(t, err)
			require.Equal(t, m, got)
		})
	}
	for typ := wire.TypeAuth; typ <= wire.TypeOffsetValue; typ++ {
		require.True(t, types[typ], "no vector for message type %s", typ)
	}
	for _, f := range []uint16{0x01, 0x09, 0x10, 0x02, 0x22, 0x04, 0x24,
		0x41, 0x49, 0x149, 0x109, 0x8001, 0x8009, 0x8109, 0x1010, 0x1090, 0x0610, 0x0210, 0x9010, 0x0090,
		0x0081, 0x0089, 0x2004, 0x4024, 0x6024, 0x00a4, 0x60a4, 0x60a2} {
		require.True(t, layouts[f], "no vector for layout 0x%04x", f)
	}
}

// TestVectorCheckCatchesMismatch makes sure the checker is not vacuous.
func TestVectorCheckCatchesMismatch(t *testing.T) {
	for _, v := range loadVectors(t) {
		if v.Error != "" {
			continue
		}
		broken := v
		broken.FileHex = ""
		frame, err := wirevector.ParseHex(v.FrameHex)
		require.NoError(t, err)
		frame[len(frame)-1] ^= 0x01
		broken.FrameHex = hex.EncodeToString(frame)
		broken.PayloadHex = ""
		require.Error(t, wirevector.Check(broken), v.Name)
	}
}
