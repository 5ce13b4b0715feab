package wire

// Consumer-group queue messages (Felix-Go addition, capability CapQueue
// 0x0200). A group consumes a durable stream: each record goes to one
// member at a time and is redelivered until acked. See docs/protocol.md
// "Queues".

// QueueConsume makes the sender a member of Group on Stream. The broker
// answers subscribed{subscription_id} on the control stream and opens an
// event stream (event_stream_hello) carrying queue_message frames. At most
// MaxInflight unacked records are out to this member at a time; a record not
// acked within VisibilityTimeoutMs is redelivered (to any member). Absent
// fields take the broker's defaults.
type QueueConsume struct {
	TenantID            string
	Namespace           string
	Stream              string
	Group               string
	Member              string
	MaxInflight         *uint64
	VisibilityTimeoutMs *uint64
	// MaxAttempts sets the group's bound on deliveries of a record, kept
	// with its state (under CapGroupMaxAttempts; 0 means none).
	MaxAttempts *uint32
}

// QueueMessage is one delivery. Shard is the stream shard the record is
// from (always sent; Offset is an offset of that shard). Redeliveries
// counts earlier deliveries of the same record to this group (0 on the
// first).
type QueueMessage struct {
	Shard        uint32
	Offset       uint64
	Redeliveries uint64
	Payload      []byte
	// Headers are the record's event headers, sent only to a client that
	// offered CapHeaders (omitted when none).
	Headers []EventHeader
}

// QueueAck acknowledges Offsets of Shard for Group: they will not be
// delivered to the group again. With RequestID the broker answers queue_ok
// once the group's position including these acks is durable, or
// queue_error. Shard nil (absent, as clients from before multi-shard
// queues send it) means shard 0 of a single-shard stream; a broker refuses
// it on a stream of more shards, where it cannot tell which record is
// meant.
type QueueAck struct {
	TenantID  string
	Namespace string
	Stream    string
	Group     string
	Shard     *uint32
	Offsets   []uint64
	RequestID *uint64
}

// QueueNack hands Offsets of Shard back to Group for immediate
// redelivery. With RequestID the broker answers queue_ok or queue_error.
// Shard is optional as for QueueAck.
type QueueNack struct {
	TenantID  string
	Namespace string
	Stream    string
	Group     string
	Shard     *uint32
	Offsets   []uint64
	RequestID *uint64
}

// QueueOK answers a queue_ack or queue_nack that carried a request_id.
type QueueOK struct {
	RequestID uint64
}

// QueueError refuses a queue_ack or queue_nack that carried a request_id.
type QueueError struct {
	RequestID uint64
	Message   string
	// Err is the typed error, for peers that negotiated
	// FeatureErrorCodes (omitted when nil).
	Err *TypedError
}

func (*QueueConsume) Type() MessageType { return TypeQueueConsume }
func (*QueueMessage) Type() MessageType { return TypeQueueMessage }
func (*QueueAck) Type() MessageType     { return TypeQueueAck }
func (*QueueNack) Type() MessageType    { return TypeQueueNack }
func (*QueueOK) Type() MessageType      { return TypeQueueOK }
func (*QueueError) Type() MessageType   { return TypeQueueError }

func appendUintArray(dst []byte, key string, vs []uint64) []byte {
	dst = append(dst, key...)
	dst = append(dst, '[')
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendUint(dst, v)
	}
	return append(dst, ']')
}

func (m *QueueConsume) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeQueueConsume)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"stream":`, m.Stream)
	dst = appendStrField(dst, `,"group":`, m.Group)
	dst = appendStrField(dst, `,"member":`, m.Member)
	dst = appendOptUint(dst, `,"max_inflight":`, m.MaxInflight)
	dst = appendOptUint(dst, `,"visibility_timeout_ms":`, m.VisibilityTimeoutMs)
	dst = appendOptU32(dst, `,"max_attempts":`, m.MaxAttempts)
	return append(dst, '}')
}

func (m *QueueMessage) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeQueueMessage)
	dst = appendUintField(dst, `,"shard":`, uint64(m.Shard))
	dst = appendUintField(dst, `,"offset":`, m.Offset)
	dst = appendUintField(dst, `,"redeliveries":`, m.Redeliveries)
	dst = append(dst, `,"payload":`...)
	dst = appendBase64(dst, m.Payload)
	dst = appendHeadersJSON(dst, m.Headers)
	return append(dst, '}')
}

// appendQueueOffsets writes queue_ack and queue_nack; shard only when set.
func appendQueueOffsets(dst []byte, t MessageType, tenant, ns, stream, group string, shard *uint32, offs []uint64, id *uint64) []byte {
	dst = appendHead(dst, t)
	dst = appendTopic(dst, tenant, ns, `,"stream":`, stream)
	dst = appendStrField(dst, `,"group":`, group)
	if shard != nil {
		dst = appendUintField(dst, `,"shard":`, uint64(*shard))
	}
	dst = appendUintArray(dst, `,"offsets":`, offs)
	dst = appendOptUint(dst, `,"request_id":`, id)
	return append(dst, '}')
}

func (m *QueueAck) AppendJSON(dst []byte) []byte {
	return appendQueueOffsets(dst, TypeQueueAck, m.TenantID, m.Namespace, m.Stream, m.Group, m.Shard, m.Offsets, m.RequestID)
}

func (m *QueueNack) AppendJSON(dst []byte) []byte {
	return appendQueueOffsets(dst, TypeQueueNack, m.TenantID, m.Namespace, m.Stream, m.Group, m.Shard, m.Offsets, m.RequestID)
}

func (m *QueueOK) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeQueueOK)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *QueueError) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeQueueError)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	dst = appendStrField(dst, `,"message":`, m.Message)
	dst = m.Err.appendJSON(dst)
	return append(dst, '}')
}
