package wire

import (
	"encoding/json"
	"errors"
)

// The roster and queue decoders are registered here rather than in the
// jsonDecoders literal so that the CapRoster and CapQueue additions stay in
// their own files; the table is complete before any DecodeJSON can run.
func init() {
	jsonDecoders[TypeRosterJoin] = func(f *fields) Message {
		return &RosterJoin{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Roster: f.str("roster"),
			Member: f.str("member"), Metadata: f.optBytes("metadata"), RequestID: f.optU64("request_id"),
		}
	}
	jsonDecoders[TypeRosterLeave] = func(f *fields) Message {
		return &RosterLeave{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Roster: f.str("roster"),
			Member: f.str("member"), RequestID: f.optU64("request_id"),
		}
	}
	jsonDecoders[TypeRosterWatch] = func(f *fields) Message {
		return &RosterWatch{TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Roster: f.str("roster")}
	}
	jsonDecoders[TypeRosterOK] = func(f *fields) Message { return &RosterOK{RequestID: f.optU64("request_id")} }
	jsonDecoders[TypeRosterSnapshot] = func(f *fields) Message {
		return &RosterSnapshot{Members: f.members("members"), Last: f.boolean("last")}
	}
	jsonDecoders[TypeRosterChange] = func(f *fields) Message {
		return &RosterChange{Kind: f.changeKind(), Member: f.str("member"), Metadata: f.optBytes("metadata")}
	}
	jsonDecoders[TypeQueueConsume] = func(f *fields) Message {
		return &QueueConsume{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
			Group: f.str("group"), Member: f.str("member"),
			MaxInflight: f.optU64("max_inflight"), VisibilityTimeoutMs: f.optU64("visibility_timeout_ms"),
			MaxAttempts: f.optU32("max_attempts"),
		}
	}
	jsonDecoders[TypeQueueMessage] = func(f *fields) Message {
		return &QueueMessage{Shard: f.shard(), Offset: f.u64("offset"), Redeliveries: f.u64("redeliveries"), Payload: f.bytes("payload"),
			Headers: f.headers()}
	}
	jsonDecoders[TypeQueueAck] = func(f *fields) Message {
		return &QueueAck{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
			Group: f.str("group"), Shard: f.optU32("shard"), Offsets: f.u64List("offsets"), RequestID: f.optU64("request_id"),
		}
	}
	jsonDecoders[TypeQueueNack] = func(f *fields) Message {
		return &QueueNack{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
			Group: f.str("group"), Shard: f.optU32("shard"), Offsets: f.u64List("offsets"), RequestID: f.optU64("request_id"),
		}
	}
	jsonDecoders[TypeQueueOK] = func(f *fields) Message { return &QueueOK{RequestID: f.u64("request_id")} }
	jsonDecoders[TypeQueueError] = func(f *fields) Message {
		return &QueueError{RequestID: f.u64("request_id"), Message: f.str("message"), Err: f.typedError()}
	}
}

func (f *fields) optBytes(name string) []byte {
	if v, ok := f.raw(name); ok {
		return f.b64Value(name, v)
	}
	return nil
}

// shard is queue_message's "shard": absent (a broker from before
// multi-shard queues) means shard 0, the only one it delivered from.
func (f *fields) shard() uint32 {
	if p := f.optU32("shard"); p != nil {
		return *p
	}
	return 0
}

func (f *fields) changeKind() RosterChangeKind {
	s := f.str("kind")
	if f.err == nil && s != string(RosterJoined) && s != string(RosterLeft) {
		f.err = &MalformedJSONError{Field: "kind", Err: errors.New("unknown roster change kind " + s)}
	}
	return RosterChangeKind(s)
}

// u64List decodes an array of u64; a null element is malformed rather than
// silently 0.
func (f *fields) u64List(name string) []uint64 {
	v, ok := f.required(name)
	if !ok {
		return nil
	}
	var list []*uint64
	if !f.unmarshal(name, v, &list) {
		return nil
	}
	out := make([]uint64, len(list))
	for i, p := range list {
		if p == nil {
			f.err = &MalformedJSONError{Field: name, Err: errors.New("null element")}
			return nil
		}
		out[i] = *p
	}
	return out
}

// members decodes roster_snapshot's array of {"member","metadata"} objects
// with the same exact-name rules as a top-level message.
func (f *fields) members(name string) []RosterMember {
	v, ok := f.required(name)
	if !ok {
		return nil
	}
	var list []map[string]json.RawMessage
	if !f.unmarshal(name, v, &list) {
		return nil
	}
	out := make([]RosterMember, len(list))
	for i, obj := range list {
		if obj == nil {
			f.err = &MalformedJSONError{Field: name, Err: errors.New("null element")}
			return nil
		}
		sub := fields{typ: f.typ, obj: objectOf(obj)}
		out[i] = RosterMember{Member: sub.str("member"), Metadata: sub.optBytes("metadata")}
		if sub.err != nil {
			f.err = sub.err
			return nil
		}
	}
	return out
}
