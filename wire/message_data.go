package wire

// Data-path JSON messages: publish, events, cache and their replies.

// Publish publishes one payload. On a control (bi) stream an absent Ack
// means acked (per_message), as the published broker does; see
// docs/protocol.md.
type Publish struct {
	TenantID  string
	Namespace string
	Stream    string
	Payload   []byte
	// Key is the routing key (base64, right after the payload, as the
	// published Felix writes it); nil is absent, and a non-nil empty key
	// is a key. It picks the stream's shard by hash (routing.go).
	Key       []byte
	RequestID *uint64
	Ack       *AckMode
	// Shard addresses the publish to one shard (Felix-Go; written last,
	// omitted when nil). With Key set, Shard wins.
	Shard *uint32
}

// PublishBatchMessage is the JSON publish_batch (the binary 0x0001 layout
// owns the name PublishBatch, being the hot path). Absent Ack on a bi stream
// means per_batch. Key as for Publish.
type PublishBatchMessage struct {
	TenantID  string
	Namespace string
	Stream    string
	Payloads  [][]byte
	Key       []byte
	RequestID *uint64
	Ack       *AckMode
	// Shard addresses the publish to one shard (Felix-Go; written last,
	// omitted when nil). With Key set, Shard wins.
	Shard *uint32
}

// Event is a single JSON event. The broker never emits it (live delivery is
// binary); it exists for completeness of the v1 message set.
type Event struct {
	TenantID  string
	Namespace string
	Stream    string
	Payload   []byte
	Offset    *uint64
}

// EventBatchMessage is the JSON event_batch, defined but not emitted, like
// Event. The binary layouts own the name EventBatch.
type EventBatchMessage struct {
	TenantID   string
	Namespace  string
	Stream     string
	Payloads   [][]byte
	BaseOffset *uint64
}

// CachePut stores Value under Key. TTLMs nil is written as "ttl_ms":null
// (no expiry). Without RequestID the broker answers ok and closes the
// stream.
type CachePut struct {
	TenantID  string
	Namespace string
	Cache     string
	Key       string
	Value     []byte
	RequestID *uint64
	TTLMs     *uint64
}

// CacheGet reads Key.
type CacheGet struct {
	TenantID  string
	Namespace string
	Cache     string
	Key       string
	RequestID *uint64
}

// CacheValue answers CacheGet. Found false is a miss and is written as
// "value":null (Value is then ignored); Found true with an empty Value is a
// hit on an empty value ("value":"").
type CacheValue struct {
	TenantID  string
	Namespace string
	Cache     string
	Key       string
	Found     bool
	Value     []byte
	RequestID *uint64
	// Version is the value's version (the published 0.6 field), sent on a
	// hit to a client that offered FeatureCacheConditional (written last,
	// omitted when nil).
	Version *uint64
}

// CacheOK answers a CachePut that carried a request_id.
type CacheOK struct {
	RequestID uint64
}

// PublishOK answers an acked JSON publish or publish_batch, and an
// idempotent publish (JSON or binary).
type PublishOK struct {
	RequestID uint64
	// Offset is the offset of the batch's first record, for peers that
	// offered FlagAckOffset (omitted when nil).
	Offset *uint64
	// Shard is the shard the batch landed on (peers that offered
	// CapShard) and Owner the shard's owner (peers that offered CapOwner,
	// cluster mode): Felix-Go fields, written last, omitted when nil.
	Shard *uint32
	Owner *Owner
}

// PublishError refuses an acked JSON publish or publish_batch.
type PublishError struct {
	RequestID uint64
	Message   string
	// Err is the typed error, for peers that negotiated
	// FeatureErrorCodes (omitted when nil).
	Err *TypedError
	// Shard and Owner as for PublishOK: on not_owner and
	// owner_unavailable.
	Shard *uint32
	Owner *Owner
}

func (*Publish) Type() MessageType             { return TypePublish }
func (*PublishBatchMessage) Type() MessageType { return TypePublishBatch }
func (*Event) Type() MessageType               { return TypeEvent }
func (*EventBatchMessage) Type() MessageType   { return TypeEventBatch }
func (*CachePut) Type() MessageType            { return TypeCachePut }
func (*CacheGet) Type() MessageType            { return TypeCacheGet }
func (*CacheValue) Type() MessageType          { return TypeCacheValue }
func (*CacheOK) Type() MessageType             { return TypeCacheOK }
func (*PublishOK) Type() MessageType           { return TypePublishOK }
func (*PublishError) Type() MessageType        { return TypePublishError }

// appendKeyAck writes the fields after the payload(s): key, request_id,
// ack, shard, each omitted when absent.
func appendKeyAck(dst []byte, key []byte, id *uint64, ack *AckMode, shard *uint32) []byte {
	dst = appendOptBase64(dst, `,"key":`, key)
	dst = appendOptUint(dst, `,"request_id":`, id)
	if ack != nil {
		dst = appendStrField(dst, `,"ack":`, ack.String())
	}
	if shard != nil {
		dst = appendUintField(dst, `,"shard":`, uint64(*shard))
	}
	return dst
}

// appendOptBase64 writes key and b as base64, nothing for nil.
func appendOptBase64(dst []byte, key string, b []byte) []byte {
	if b == nil {
		return dst
	}
	dst = append(dst, key...)
	return appendBase64(dst, b)
}

func (m *Publish) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypePublish)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"stream":`, m.Stream)
	dst = append(dst, `,"payload":`...)
	dst = appendBase64(dst, m.Payload)
	dst = appendKeyAck(dst, m.Key, m.RequestID, m.Ack, m.Shard)
	return append(dst, '}')
}

func (m *PublishBatchMessage) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypePublishBatch)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"stream":`, m.Stream)
	dst = append(dst, `,"payloads":`...)
	dst = appendBase64Array(dst, m.Payloads)
	dst = appendKeyAck(dst, m.Key, m.RequestID, m.Ack, m.Shard)
	return append(dst, '}')
}

func (m *Event) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeEvent)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"stream":`, m.Stream)
	dst = append(dst, `,"payload":`...)
	dst = appendBase64(dst, m.Payload)
	dst = appendOptUint(dst, `,"offset":`, m.Offset)
	return append(dst, '}')
}

func (m *EventBatchMessage) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeEventBatch)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"stream":`, m.Stream)
	dst = append(dst, `,"payloads":`...)
	dst = appendBase64Array(dst, m.Payloads)
	dst = appendOptUint(dst, `,"base_offset":`, m.BaseOffset)
	return append(dst, '}')
}

func (m *CachePut) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCachePut)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"cache":`, m.Cache)
	dst = appendStrField(dst, `,"key":`, m.Key)
	dst = append(dst, `,"value":`...)
	dst = appendBase64(dst, m.Value)
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	if m.TTLMs == nil {
		// serde writes a None TTL as null, not omitted (spec 2.3).
		return append(dst, `,"ttl_ms":null}`...)
	}
	dst = appendUintField(dst, `,"ttl_ms":`, *m.TTLMs)
	return append(dst, '}')
}

func (m *CacheGet) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCacheGet)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"cache":`, m.Cache)
	dst = appendStrField(dst, `,"key":`, m.Key)
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *CacheValue) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCacheValue)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"cache":`, m.Cache)
	dst = appendStrField(dst, `,"key":`, m.Key)
	if m.Found {
		dst = append(dst, `,"value":`...)
		dst = appendBase64(dst, m.Value)
	} else {
		dst = append(dst, `,"value":null`...)
	}
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	dst = appendOptUint(dst, `,"version":`, m.Version)
	return append(dst, '}')
}

func (m *CacheOK) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCacheOK)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *PublishOK) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypePublishOK)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	dst = appendOptUint(dst, `,"offset":`, m.Offset)
	dst = appendOwnerJSON(dst, m.Shard, m.Owner)
	return append(dst, '}')
}

func (m *PublishError) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypePublishError)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	dst = appendStrField(dst, `,"message":`, m.Message)
	dst = m.Err.appendJSON(dst)
	dst = appendOwnerJSON(dst, m.Shard, m.Owner)
	return append(dst, '}')
}
