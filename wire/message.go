package wire

import "fmt"

// Message is a JSON control message (frame flags 0). Each type is a struct
// whose optional fields are pointers (nil = omitted, or null where the spec
// writes null); the pointer type implements Message.
type Message interface {
	Type() MessageType
	// AppendJSON appends the message exactly as serde_json would write it:
	// "type" first, then the fields in spec order, no whitespace.
	AppendJSON(dst []byte) []byte
}

// MessageType is the JSON "type" tag.
type MessageType uint8

// Message types, in the order of the spec's table 2.3.
const (
	TypeAuth MessageType = iota + 1
	TypeAuthOK
	TypePublish
	TypePublishBatch
	TypeSubscribe
	TypeSubscribed
	TypeEventStreamHello
	TypeEvent
	TypeEventBatch
	TypeCachePut
	TypeCacheGet
	TypeCacheValue
	TypeCacheOK
	TypePublishOK
	TypePublishError
	TypeOK
	TypeError
	TypeSubscribeCursorError
	TypeSubscriptionGap // Felix-Go addition, gated by CapGapNotices
	// Felix-Go additions gated by CapCache (message_cache.go).
	TypeCacheDelete
	TypeCacheDeleted
	TypeCounterAdd
	TypeCounterGet
	TypeCounterValue
	TypeWatch
	TypeCacheError
	// Felix-Go additions gated by CapRoster (message_roster.go).
	TypeRosterJoin
	TypeRosterLeave
	TypeRosterWatch
	TypeRosterOK
	TypeRosterSnapshot
	TypeRosterChange
	// Felix-Go additions gated by CapQueue (message_queue.go).
	TypeQueueConsume
	TypeQueueMessage
	TypeQueueAck
	TypeQueueNack
	TypeQueueOK
	TypeQueueError
	// The published Felix's idempotent producer and stream width
	// (message_producer.go), gated by FeatureIdempotentProducer and
	// FeatureStreamShards.
	TypeProducerInit
	TypeProducerInitOK
	TypePublishIdempotent
	TypePublishRefused
	TypeStreamShards
	TypeStreamShardsView
	// The published Felix's consumer groups (message_group.go), conditional
	// cache writes and reads by time (message_conditional.go).
	TypeGroupPoll
	TypeGroupRecords
	TypeGroupAck
	TypeGroupNack
	TypeGroupDeadLetters
	TypeGroupDeadLetterList
	TypeGroupDiscard
	TypeGroupRedrive
	TypeGroupDeadLetter
	TypeGroupExtend
	TypeGroupExtended
	TypeGroupSeek
	TypeGroupPosition
	TypeGroupDescribe
	TypeGroupInfo
	TypeGroupDelete
	TypeGroupDeleted
	TypeCachePutIf
	TypeCacheDeleteIf
	TypeCacheConditionResult
	TypeOffsetForTime
	TypeOffsetValue
	numTypes
)

var typeNames = [numTypes]string{
	TypeAuth:                 "auth",
	TypeAuthOK:               "auth_ok",
	TypePublish:              "publish",
	TypePublishBatch:         "publish_batch",
	TypeSubscribe:            "subscribe",
	TypeSubscribed:           "subscribed",
	TypeEventStreamHello:     "event_stream_hello",
	TypeEvent:                "event",
	TypeEventBatch:           "event_batch",
	TypeCachePut:             "cache_put",
	TypeCacheGet:             "cache_get",
	TypeCacheValue:           "cache_value",
	TypeCacheOK:              "cache_ok",
	TypePublishOK:            "publish_ok",
	TypePublishError:         "publish_error",
	TypeOK:                   "ok",
	TypeError:                "error",
	TypeSubscribeCursorError: "subscribe_cursor_error",
	TypeSubscriptionGap:      "subscription_gap",
	TypeCacheDelete:          "cache_delete",
	TypeCacheDeleted:         "cache_deleted",
	TypeCounterAdd:           "counter_add",
	TypeCounterGet:           "counter_get",
	TypeCounterValue:         "counter_value",
	TypeWatch:                "watch",
	TypeCacheError:           "cache_error",
	TypeRosterJoin:           "roster_join",
	TypeRosterLeave:          "roster_leave",
	TypeRosterWatch:          "roster_watch",
	TypeRosterOK:             "roster_ok",
	TypeRosterSnapshot:       "roster_snapshot",
	TypeRosterChange:         "roster_change",
	TypeQueueConsume:         "queue_consume",
	TypeQueueMessage:         "queue_message",
	TypeQueueAck:             "queue_ack",
	TypeQueueNack:            "queue_nack",
	TypeQueueOK:              "queue_ok",
	TypeQueueError:           "queue_error",
	TypeProducerInit:         "producer_init",
	TypeProducerInitOK:       "producer_init_ok",
	TypePublishIdempotent:    "publish_idempotent",
	TypePublishRefused:       "publish_refused",
	TypeStreamShards:         "stream_shards",
	TypeStreamShardsView:     "stream_shards_view",
	TypeGroupPoll:            "group_poll",
	TypeGroupRecords:         "group_records",
	TypeGroupAck:             "group_ack",
	TypeGroupNack:            "group_nack",
	TypeGroupDeadLetters:     "group_dead_letters",
	TypeGroupDeadLetterList:  "group_dead_letter_list",
	TypeGroupDiscard:         "group_discard",
	TypeGroupRedrive:         "group_redrive",
	TypeGroupDeadLetter:      "group_dead_letter",
	TypeGroupExtend:          "group_extend",
	TypeGroupExtended:        "group_extended",
	TypeGroupSeek:            "group_seek",
	TypeGroupPosition:        "group_position",
	TypeGroupDescribe:        "group_describe",
	TypeGroupInfo:            "group_info",
	TypeGroupDelete:          "group_delete",
	TypeGroupDeleted:         "group_deleted",
	TypeCachePutIf:           "cache_put_if",
	TypeCacheDeleteIf:        "cache_delete_if",
	TypeCacheConditionResult: "cache_condition_result",
	TypeOffsetForTime:        "offset_for_time",
	TypeOffsetValue:          "offset_value",
}

// String returns the wire tag ("auth", "publish_batch", ...).
func (t MessageType) String() string {
	if t > 0 && t < numTypes {
		return typeNames[t]
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}

// ParseMessageType maps a wire tag to its MessageType.
func ParseMessageType(s string) (MessageType, bool) {
	for t := TypeAuth; t < numTypes; t++ {
		if typeNames[t] == s {
			return t, true
		}
	}
	return 0, false
}

// Auth must be the first frame on every stream. ClientFlags,
// ClientFeatures (with ClientFeaturesHi) and ClientCaps are the three
// words the client advertises; see capabilities.go. ClientCaps is a
// Felix-Go addition, written last.
type Auth struct {
	TenantID         string
	Token            string
	ClientFlags      *uint16
	ClientFeatures   *uint32
	ClientFeaturesHi *uint32
	ClientCaps       *uint32
}

// AuthOK answers an Auth that carried ClientFlags; an Auth without them is
// answered with OK. The optional words are omitted when nil; ServerCaps is
// a Felix-Go addition, written last.
type AuthOK struct {
	ServerFlags      uint16
	ServerFeatures   *uint32
	ServerFeaturesHi *uint32
	ServerCaps       *uint32
}

// OK is the bare success reply ({"type":"ok"}).
type OK struct{}

// ErrorMessage is a protocol or request error without correlation id
// ({"type":"error","message":...}).
type ErrorMessage struct {
	Message string
	// Err is the typed error, for peers that negotiated
	// FeatureErrorCodes (omitted when nil).
	Err *TypedError
	// Shard and Owner name the shard and its owner on a not_owner
	// refusal, for peers that offered CapOwner (Felix-Go, written last,
	// omitted when nil).
	Shard *uint32
	Owner *Owner
}

// StartKind selects where a subscription begins.
type StartKind uint8

const (
	StartLatest StartKind = iota
	StartEarliest
	StartOffset
)

// Start is subscribe's optional start position: "latest", "earliest" or
// {"offset":n}.
type Start struct {
	Kind   StartKind
	Offset uint64 // StartOffset only
}

// Subscribe opens a subscription. Brokers assign subscription ids and
// ignore a client-supplied SubscriptionID (see docs/protocol.md). Shard is a
// Felix-Go addition (written last, omitted when nil, so v1 bytes are
// unchanged): the shard of the stream to follow, default 0.
type Subscribe struct {
	TenantID       string
	Namespace      string
	Stream         string
	SubscriptionID *uint64
	Start          *Start
	Shard          *uint32
}

// Subscribed acknowledges a Subscribe on the control stream, before any
// replay is written to the event stream.
type Subscribed struct {
	SubscriptionID uint64
	// StartOffset is the offset of the first event the subscription
	// delivers (the published Felix 0.6's field). Sent to clients that
	// negotiated EVENT_BATCH_OFFSETS, so a client that has received
	// nothing yet still knows where to resume.
	StartOffset *uint64
}

// EventStreamHello is the first frame on a broker-opened event stream; it
// binds the stream to a subscription.
type EventStreamHello struct {
	SubscriptionID uint64
}

// CursorReason says why a subscribe's start offset was refused.
type CursorReason string

const (
	CursorTooOld   CursorReason = "too_old"
	CursorInFuture CursorReason = "in_future"
)

// SubscribeCursorError refuses a Subscribe whose start offset is outside
// the retained range; Available is the nearest valid offset.
type SubscribeCursorError struct {
	Reason    CursorReason
	Requested uint64
	Available uint64
}

func (*Auth) Type() MessageType                 { return TypeAuth }
func (*AuthOK) Type() MessageType               { return TypeAuthOK }
func (*OK) Type() MessageType                   { return TypeOK }
func (*ErrorMessage) Type() MessageType         { return TypeError }
func (*Subscribe) Type() MessageType            { return TypeSubscribe }
func (*Subscribed) Type() MessageType           { return TypeSubscribed }
func (*EventStreamHello) Type() MessageType     { return TypeEventStreamHello }
func (*SubscribeCursorError) Type() MessageType { return TypeSubscribeCursorError }
func (*SubscriptionGap) Type() MessageType      { return TypeSubscriptionGap }

func (m *Auth) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeAuth)
	dst = appendStrField(dst, `,"tenant_id":`, m.TenantID)
	dst = appendStrField(dst, `,"token":`, m.Token)
	if m.ClientFlags != nil {
		dst = appendUintField(dst, `,"client_flags":`, uint64(*m.ClientFlags))
	}
	dst = appendOptU32(dst, `,"client_features":`, m.ClientFeatures)
	dst = appendOptU32(dst, `,"client_features_hi":`, m.ClientFeaturesHi)
	dst = appendOptU32(dst, `,"client_caps":`, m.ClientCaps)
	return append(dst, '}')
}

func (m *AuthOK) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeAuthOK)
	dst = appendUintField(dst, `,"server_flags":`, uint64(m.ServerFlags))
	dst = appendOptU32(dst, `,"server_features":`, m.ServerFeatures)
	dst = appendOptU32(dst, `,"server_features_hi":`, m.ServerFeaturesHi)
	dst = appendOptU32(dst, `,"server_caps":`, m.ServerCaps)
	return append(dst, '}')
}

func appendOptU32(dst []byte, key string, v *uint32) []byte {
	if v == nil {
		return dst
	}
	return appendUintField(dst, key, uint64(*v))
}

func (m *OK) AppendJSON(dst []byte) []byte {
	return append(appendHead(dst, TypeOK), '}')
}

func (m *ErrorMessage) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeError)
	dst = appendStrField(dst, `,"message":`, m.Message)
	dst = m.Err.appendJSON(dst)
	dst = appendOwnerJSON(dst, m.Shard, m.Owner)
	return append(dst, '}')
}

func (m *Subscribe) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeSubscribe)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"stream":`, m.Stream)
	dst = appendOptUint(dst, `,"subscription_id":`, m.SubscriptionID)
	if m.Start != nil {
		dst = append(dst, `,"start":`...)
		dst = m.Start.appendJSON(dst)
	}
	if m.Shard != nil {
		dst = appendUintField(dst, `,"shard":`, uint64(*m.Shard))
	}
	return append(dst, '}')
}

// appendJSON writes serde's externally tagged form. An unknown Kind is
// written as a string no decoder accepts, so the bug surfaces at the peer
// instead of silently subscribing at the tail.
func (s *Start) appendJSON(dst []byte) []byte {
	switch s.Kind {
	case StartLatest:
		return append(dst, `"latest"`...)
	case StartEarliest:
		return append(dst, `"earliest"`...)
	case StartOffset:
		dst = append(dst, `{"offset":`...)
		dst = appendUint(dst, s.Offset)
		return append(dst, '}')
	}
	return appendString(dst, fmt.Sprintf("start_kind(%d)", uint8(s.Kind)))
}

func (m *Subscribed) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeSubscribed)
	dst = appendUintField(dst, `,"subscription_id":`, m.SubscriptionID)
	dst = appendOptUint(dst, `,"start_offset":`, m.StartOffset)
	return append(dst, '}')
}

func (m *EventStreamHello) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeEventStreamHello)
	dst = appendUintField(dst, `,"subscription_id":`, m.SubscriptionID)
	return append(dst, '}')
}

func (m *SubscribeCursorError) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeSubscribeCursorError)
	dst = appendStrField(dst, `,"reason":`, string(m.Reason))
	dst = appendUintField(dst, `,"requested":`, m.Requested)
	dst = appendUintField(dst, `,"available":`, m.Available)
	return append(dst, '}')
}

// SubscriptionGap (Felix-Go addition) tells a subscriber, on its event
// stream, that Dropped events were dropped for it since the last notice
// (slow consumer, drop policy). Sent only to clients that advertised
// CapGapNotices.
type SubscriptionGap struct {
	SubscriptionID uint64
	Dropped        uint64
}

func (m *SubscriptionGap) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeSubscriptionGap)
	dst = appendUintField(dst, `,"subscription_id":`, m.SubscriptionID)
	dst = appendUintField(dst, `,"dropped":`, m.Dropped)
	return append(dst, '}')
}
