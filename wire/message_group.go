package wire

import (
	"encoding/json"
	"errors"
	"strconv"
)

// Consumer groups as the published Felix 0.6 defines them (features
// FeatureConsumerGroup, FeatureGroupDeadLetters, FeatureGroupConsumer,
// FeatureGroupAdmin, FeatureGroupClaimControl): a client polls one shard of
// a durable stream for records, each claimed by it until acked, nacked or
// its visibility lapses. docs/protocol.md, "Consumer groups", has the JSON
// and the semantics. Fields follow the published serialization order;
// "max_attempts" and "headers" are Felix-Go additions written last, sent
// only under CapGroupMaxAttempts and CapHeaders.
//
// Every group request carries request_id, and its answer carries it back:
// cache_ok (ack, nack, discard, redrive, dead_letter) or the request's own
// answer. A Felix-Go broker refuses a group request of a client that
// offered CapQueue with queue_error (correlated), of any other client with
// error.

// GroupRef names a consumer group on one shard of a stream.
type GroupRef struct {
	TenantID  string
	Namespace string
	Stream    string
	Shard     uint32
	Group     string
}

// GroupPoll asks for up to MaxRecords records, waiting up to WaitMs for
// some to arrive. Consumer names the member (with the connection's
// principal); Reclaim hands that member's claims from older connections
// back first. VisibilityMs overrides the broker's visibility timeout for
// these claims. MaxAttempts (Felix-Go) sets the group's bound on
// deliveries of a record on this shard, kept with its state.
type GroupPoll struct {
	GroupRef
	MaxRecords   uint32
	WaitMs       uint64
	RequestID    uint64
	Consumer     *string
	Reclaim      *bool
	VisibilityMs *uint64
	MaxAttempts  *uint32
}

// GroupRecord is one record a poll hands out. Attempts counts deliveries
// including this one. Publisher and TimestampMicros are sent only to
// clients that offered FeatureGroupPublisher and FeatureRecordTimestamps,
// Headers (Felix-Go) only under CapHeaders.
type GroupRecord struct {
	Offset          uint64
	Payload         []byte
	Attempts        uint64
	SkippedBefore   *uint64
	Publisher       *string
	TimestampMicros *uint64
	Headers         []EventHeader
}

// GroupRecords answers GroupPoll; it may be empty.
type GroupRecords struct {
	Records   []GroupRecord
	RequestID uint64
}

// GroupAck finishes a record. Answered with CacheOK.
type GroupAck struct {
	GroupRef
	Offset    uint64
	RequestID uint64
}

// GroupNack hands a record back: owed again at once, or after DelayMs.
// Attempts names the delivery handed back (refused stale_claim once that
// claim no longer stands). Answered with CacheOK.
type GroupNack struct {
	GroupRef
	Offset    uint64
	RequestID uint64
	DelayMs   *uint64
	Attempts  *uint64
}

// GroupDeadLetters lists the group's dead letters on the shard; answered
// with GroupDeadLetterList.
type GroupDeadLetters struct {
	GroupRef
	RequestID uint64
}

// GroupDeadLetterList answers GroupDeadLetters, lowest offset first.
type GroupDeadLetterList struct {
	Offsets   []uint64
	RequestID uint64
}

// GroupOffsetOp is the shape of group_discard (drop a dead letter),
// group_redrive (owe it to the group again) and group_dead_letter (list a
// record in play as a dead letter and finish it); each is answered with
// CacheOK.
type GroupOffsetOp struct {
	GroupRef
	Offset    uint64
	RequestID uint64
}

// GroupDiscard drops a dead letter.
type GroupDiscard struct{ GroupOffsetOp }

// GroupRedrive puts a dead letter back: it is owed to the group again.
type GroupRedrive struct{ GroupOffsetOp }

// GroupDeadLetter gives up on a record in play.
type GroupDeadLetter struct{ GroupOffsetOp }

// GroupExtend keeps the claim of delivery Attempts of Offset standing for
// ExtendMs from now; answered with GroupExtended.
type GroupExtend struct {
	GroupRef
	Offset    uint64
	Attempts  uint64
	ExtendMs  uint64
	RequestID uint64
}

// GroupExtended answers GroupExtend with the extension granted.
type GroupExtended struct {
	VisibleMs uint64
	RequestID uint64
}

// GroupSeek moves the group's cursor on the shard to Start; with IfNew only
// a group that does not exist yet. Answered with GroupPosition.
type GroupSeek struct {
	GroupRef
	Start     Start
	IfNew     *bool
	RequestID uint64
}

// GroupPosition answers GroupSeek: where the group stands, and whether the
// seek moved it.
type GroupPosition struct {
	Offset    uint64
	Moved     bool
	RequestID uint64
}

// GroupDescribe asks for the group's state on the shard; answered with
// GroupInfo.
type GroupDescribe struct {
	GroupRef
	RequestID uint64
}

// GroupInfo answers GroupDescribe. Committed is absent for a group without
// a cursor; Tail is the shard's committed tail, so Tail-Committed is the
// lag. InFlight and Owed are the broker's memory. MaxAttempts (Felix-Go,
// under CapGroupMaxAttempts) is the group's bound, 0 for none.
type GroupInfo struct {
	Committed   *uint64
	Tail        uint64
	InFlight    uint64
	Owed        uint64
	DeadLetters uint64
	RequestID   uint64
	MaxAttempts *uint32
}

// GroupDelete removes the group's cursor and dead letters on the shard;
// answered with GroupDeleted.
type GroupDelete struct {
	GroupRef
	RequestID uint64
}

// GroupDeleted answers GroupDelete.
type GroupDeleted struct {
	Existed   bool
	RequestID uint64
}

func (*GroupPoll) Type() MessageType           { return TypeGroupPoll }
func (*GroupRecords) Type() MessageType        { return TypeGroupRecords }
func (*GroupAck) Type() MessageType            { return TypeGroupAck }
func (*GroupNack) Type() MessageType           { return TypeGroupNack }
func (*GroupDeadLetters) Type() MessageType    { return TypeGroupDeadLetters }
func (*GroupDeadLetterList) Type() MessageType { return TypeGroupDeadLetterList }
func (*GroupDiscard) Type() MessageType        { return TypeGroupDiscard }
func (*GroupRedrive) Type() MessageType        { return TypeGroupRedrive }
func (*GroupDeadLetter) Type() MessageType     { return TypeGroupDeadLetter }
func (*GroupExtend) Type() MessageType         { return TypeGroupExtend }
func (*GroupExtended) Type() MessageType       { return TypeGroupExtended }
func (*GroupSeek) Type() MessageType           { return TypeGroupSeek }
func (*GroupPosition) Type() MessageType       { return TypeGroupPosition }
func (*GroupDescribe) Type() MessageType       { return TypeGroupDescribe }
func (*GroupInfo) Type() MessageType           { return TypeGroupInfo }
func (*GroupDelete) Type() MessageType         { return TypeGroupDelete }
func (*GroupDeleted) Type() MessageType        { return TypeGroupDeleted }

// Ref returns the group a request names.
func (r *GroupRef) Ref() *GroupRef { return r }

// GroupRequest is every group request: it names a group on a shard and
// carries a request id.
type GroupRequest interface {
	Message
	Ref() *GroupRef
	ID() uint64
}

func (m *GroupPoll) ID() uint64        { return m.RequestID }
func (m *GroupAck) ID() uint64         { return m.RequestID }
func (m *GroupNack) ID() uint64        { return m.RequestID }
func (m *GroupDeadLetters) ID() uint64 { return m.RequestID }
func (m *GroupOffsetOp) ID() uint64    { return m.RequestID }
func (m *GroupExtend) ID() uint64      { return m.RequestID }
func (m *GroupSeek) ID() uint64        { return m.RequestID }
func (m *GroupDescribe) ID() uint64    { return m.RequestID }
func (m *GroupDelete) ID() uint64      { return m.RequestID }

func appendGroupRef(dst []byte, t MessageType, r *GroupRef) []byte {
	dst = appendHead(dst, t)
	dst = appendTopic(dst, r.TenantID, r.Namespace, `,"stream":`, r.Stream)
	dst = appendUintField(dst, `,"shard":`, uint64(r.Shard))
	return appendStrField(dst, `,"group":`, r.Group)
}

// appendGroupRequest writes a request that is a group and a request id.
func appendGroupRequest(dst []byte, t MessageType, r *GroupRef, id uint64) []byte {
	dst = appendGroupRef(dst, t, r)
	dst = appendUintField(dst, `,"request_id":`, id)
	return append(dst, '}')
}

func appendOptBool(dst []byte, key string, v *bool) []byte {
	if v == nil {
		return dst
	}
	dst = append(dst, key...)
	return strconv.AppendBool(dst, *v)
}

func appendOptStr(dst []byte, key string, v *string) []byte {
	if v == nil {
		return dst
	}
	return appendStrField(dst, key, *v)
}

func (m *GroupPoll) AppendJSON(dst []byte) []byte {
	dst = appendGroupRef(dst, TypeGroupPoll, &m.GroupRef)
	dst = appendUintField(dst, `,"max_records":`, uint64(m.MaxRecords))
	dst = appendUintField(dst, `,"wait_ms":`, m.WaitMs)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	dst = appendOptStr(dst, `,"consumer":`, m.Consumer)
	dst = appendOptBool(dst, `,"reclaim":`, m.Reclaim)
	dst = appendOptUint(dst, `,"visibility_ms":`, m.VisibilityMs)
	dst = appendOptU32(dst, `,"max_attempts":`, m.MaxAttempts)
	return append(dst, '}')
}

func (m *GroupRecords) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeGroupRecords)
	dst = append(dst, `,"records":[`...)
	for i := range m.Records {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = m.Records[i].appendJSON(dst)
	}
	dst = append(dst, ']')
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (r *GroupRecord) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"offset":`...)
	dst = appendUint(dst, r.Offset)
	dst = append(dst, `,"payload":`...)
	dst = appendBase64(dst, r.Payload)
	dst = appendUintField(dst, `,"attempts":`, r.Attempts)
	dst = appendOptUint(dst, `,"skipped_before":`, r.SkippedBefore)
	dst = appendOptStr(dst, `,"publisher":`, r.Publisher)
	dst = appendOptUint(dst, `,"timestamp_micros":`, r.TimestampMicros)
	dst = appendHeadersJSON(dst, r.Headers)
	return append(dst, '}')
}

func (m *GroupAck) AppendJSON(dst []byte) []byte {
	dst = appendGroupRef(dst, TypeGroupAck, &m.GroupRef)
	dst = appendUintField(dst, `,"offset":`, m.Offset)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *GroupNack) AppendJSON(dst []byte) []byte {
	dst = appendGroupRef(dst, TypeGroupNack, &m.GroupRef)
	dst = appendUintField(dst, `,"offset":`, m.Offset)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	dst = appendOptUint(dst, `,"delay_ms":`, m.DelayMs)
	dst = appendOptUint(dst, `,"attempts":`, m.Attempts)
	return append(dst, '}')
}

func (m *GroupDeadLetters) AppendJSON(dst []byte) []byte {
	return appendGroupRequest(dst, TypeGroupDeadLetters, &m.GroupRef, m.RequestID)
}

func (m *GroupDeadLetterList) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeGroupDeadLetterList)
	dst = appendUintArray(dst, `,"offsets":`, m.Offsets)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *GroupOffsetOp) appendAs(dst []byte, t MessageType) []byte {
	dst = appendGroupRef(dst, t, &m.GroupRef)
	dst = appendUintField(dst, `,"offset":`, m.Offset)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *GroupDiscard) AppendJSON(dst []byte) []byte    { return m.appendAs(dst, TypeGroupDiscard) }
func (m *GroupRedrive) AppendJSON(dst []byte) []byte    { return m.appendAs(dst, TypeGroupRedrive) }
func (m *GroupDeadLetter) AppendJSON(dst []byte) []byte { return m.appendAs(dst, TypeGroupDeadLetter) }

func (m *GroupExtend) AppendJSON(dst []byte) []byte {
	dst = appendGroupRef(dst, TypeGroupExtend, &m.GroupRef)
	dst = appendUintField(dst, `,"offset":`, m.Offset)
	dst = appendUintField(dst, `,"attempts":`, m.Attempts)
	dst = appendUintField(dst, `,"extend_ms":`, m.ExtendMs)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *GroupExtended) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeGroupExtended)
	dst = appendUintField(dst, `,"visible_ms":`, m.VisibleMs)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *GroupSeek) AppendJSON(dst []byte) []byte {
	dst = appendGroupRef(dst, TypeGroupSeek, &m.GroupRef)
	dst = append(dst, `,"start":`...)
	dst = m.Start.appendJSON(dst)
	dst = appendOptBool(dst, `,"if_new":`, m.IfNew)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *GroupPosition) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeGroupPosition)
	dst = appendUintField(dst, `,"offset":`, m.Offset)
	dst = append(dst, `,"moved":`...)
	dst = strconv.AppendBool(dst, m.Moved)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *GroupDescribe) AppendJSON(dst []byte) []byte {
	return appendGroupRequest(dst, TypeGroupDescribe, &m.GroupRef, m.RequestID)
}

func (m *GroupInfo) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeGroupInfo)
	dst = appendOptUint(dst, `,"committed":`, m.Committed)
	dst = appendUintField(dst, `,"tail":`, m.Tail)
	dst = appendUintField(dst, `,"in_flight":`, m.InFlight)
	dst = appendUintField(dst, `,"owed":`, m.Owed)
	dst = appendUintField(dst, `,"dead_letters":`, m.DeadLetters)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	dst = appendOptU32(dst, `,"max_attempts":`, m.MaxAttempts)
	return append(dst, '}')
}

func (m *GroupDelete) AppendJSON(dst []byte) []byte {
	return appendGroupRequest(dst, TypeGroupDelete, &m.GroupRef, m.RequestID)
}

func (m *GroupDeleted) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeGroupDeleted)
	dst = append(dst, `,"existed":`...)
	dst = strconv.AppendBool(dst, m.Existed)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (f *fields) groupRef() GroupRef {
	return GroupRef{TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
		Shard: uint32(f.reqUint("shard", 32)), Group: f.str("group")}
}

func (f *fields) offsetOp() GroupOffsetOp {
	return GroupOffsetOp{GroupRef: f.groupRef(), Offset: f.u64("offset"), RequestID: f.u64("request_id")}
}

func (f *fields) optU64Or0(name string) uint64 {
	n, _ := f.optUint(name, 64)
	return n
}

func init() {
	jsonDecoders[TypeGroupPoll] = func(f *fields) Message {
		return &GroupPoll{GroupRef: f.groupRef(), MaxRecords: uint32(f.reqUint("max_records", 32)),
			WaitMs: f.optU64Or0("wait_ms"), RequestID: f.u64("request_id"), Consumer: f.optStr("consumer"),
			Reclaim: f.optBool("reclaim"), VisibilityMs: f.optU64("visibility_ms"), MaxAttempts: f.optU32("max_attempts")}
	}
	jsonDecoders[TypeGroupRecords] = func(f *fields) Message {
		return &GroupRecords{Records: f.groupRecords(), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeGroupAck] = func(f *fields) Message {
		return &GroupAck{GroupRef: f.groupRef(), Offset: f.u64("offset"), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeGroupNack] = func(f *fields) Message {
		return &GroupNack{GroupRef: f.groupRef(), Offset: f.u64("offset"), RequestID: f.u64("request_id"),
			DelayMs: f.optU64("delay_ms"), Attempts: f.optU64("attempts")}
	}
	jsonDecoders[TypeGroupDeadLetters] = func(f *fields) Message {
		return &GroupDeadLetters{GroupRef: f.groupRef(), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeGroupDeadLetterList] = func(f *fields) Message {
		return &GroupDeadLetterList{Offsets: f.u64List("offsets"), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeGroupDiscard] = func(f *fields) Message { return &GroupDiscard{f.offsetOp()} }
	jsonDecoders[TypeGroupRedrive] = func(f *fields) Message { return &GroupRedrive{f.offsetOp()} }
	jsonDecoders[TypeGroupDeadLetter] = func(f *fields) Message { return &GroupDeadLetter{f.offsetOp()} }
	jsonDecoders[TypeGroupExtend] = func(f *fields) Message {
		return &GroupExtend{GroupRef: f.groupRef(), Offset: f.u64("offset"), Attempts: f.u64("attempts"),
			ExtendMs: f.u64("extend_ms"), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeGroupExtended] = func(f *fields) Message {
		return &GroupExtended{VisibleMs: f.u64("visible_ms"), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeGroupSeek] = func(f *fields) Message {
		m := &GroupSeek{GroupRef: f.groupRef()}
		if s := f.start(); s != nil {
			m.Start = *s
		} else if f.err == nil {
			f.err = &MissingFieldError{Type: f.typ, Field: "start"}
		}
		m.IfNew, m.RequestID = f.optBool("if_new"), f.u64("request_id")
		return m
	}
	jsonDecoders[TypeGroupPosition] = func(f *fields) Message {
		return &GroupPosition{Offset: f.u64("offset"), Moved: f.boolean("moved"), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeGroupDescribe] = func(f *fields) Message {
		return &GroupDescribe{GroupRef: f.groupRef(), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeGroupInfo] = func(f *fields) Message {
		return &GroupInfo{Committed: f.optU64("committed"), Tail: f.u64("tail"), InFlight: f.u64("in_flight"),
			Owed: f.u64("owed"), DeadLetters: f.u64("dead_letters"), RequestID: f.u64("request_id"),
			MaxAttempts: f.optU32("max_attempts")}
	}
	jsonDecoders[TypeGroupDelete] = func(f *fields) Message {
		return &GroupDelete{GroupRef: f.groupRef(), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeGroupDeleted] = func(f *fields) Message {
		return &GroupDeleted{Existed: f.boolean("existed"), RequestID: f.u64("request_id")}
	}
}

// groupRecords decodes group_records' array of record objects with the
// same exact-name rules as a top-level message.
func (f *fields) groupRecords() []GroupRecord {
	v, ok := f.required("records")
	if !ok {
		return nil
	}
	var list []json.RawMessage
	if !f.unmarshal("records", v, &list) {
		return nil
	}
	out := make([]GroupRecord, len(list))
	for i, raw := range list {
		obj, ok := splitObject(raw, nil)
		if !ok {
			f.err = &MalformedJSONError{Field: "records", Err: errors.New("record is not an object")}
			return nil
		}
		sub := fields{typ: f.typ, obj: obj}
		out[i] = GroupRecord{Offset: sub.u64("offset"), Payload: sub.bytes("payload"), Attempts: sub.u64("attempts"),
			SkippedBefore: sub.optU64("skipped_before"), Publisher: sub.optStr("publisher"),
			TimestampMicros: sub.optU64("timestamp_micros"), Headers: sub.headers()}
		if sub.err != nil {
			f.err = sub.err
			return nil
		}
	}
	return out
}
