package wire

import (
	"bytes"
	"encoding/json"
	"errors"
)

// The published Felix's idempotent producer (FeatureIdempotentProducer)
// and stream width (FeatureStreamShards) messages.

// ProducerInit asks the broker for a fresh producer id.
type ProducerInit struct {
	RequestID uint64
}

// ProducerInitOK carries a fresh random 64-bit producer id.
type ProducerInitOK struct {
	RequestID  uint64
	ProducerID uint64
}

// PublishIdempotent is the JSON form of an idempotent publish (binary:
// FlagPublishIdempotent). It is answered publish_ok, publish_refused or
// publish_error.
type PublishIdempotent struct {
	TenantID  string
	Namespace string
	Stream    string
	Payloads  [][]byte
	// Key as for Publish: nil is absent.
	Key        []byte
	RequestID  uint64
	ProducerID uint64
	Sequence   uint64
	// Shard addresses the batch to one shard (Felix-Go; written last,
	// omitted when nil). With Key set, Shard wins.
	Shard *uint32
}

// RefusalKind says why an idempotent publish was refused.
type RefusalKind string

const (
	// RefusedSequenceGap: the sequence is ahead of the next one the
	// broker expects (Refusal.Expected).
	RefusedSequenceGap RefusalKind = "sequence_gap"
	// RefusedUnknownProducer: the broker holds no state for the producer
	// and the sequence is not 0 (forgotten, or a new in-memory leader).
	RefusedUnknownProducer RefusalKind = "unknown_producer"
	// RefusedSequenceExpired: the sequence is older than the remembered
	// window, so the broker cannot tell whether it holds it.
	RefusedSequenceExpired RefusalKind = "sequence_expired"
	// RefusedSequenceReused: a remembered sequence re-sent with other data
	// (only to clients with FeatureSequenceReused).
	RefusedSequenceReused RefusalKind = "sequence_reused"
	// RefusedOffsetMismatch: publish_if's expected offset is not the tail
	// (Refusal.Tail). Defined by the published Felix; not sent by ours.
	RefusedOffsetMismatch RefusalKind = "offset_mismatch"
	// RefusedNotLeader: this broker does not own the shard; idempotent
	// publishes are never forwarded. Refusal.NodeID / Addr name the owner.
	RefusedNotLeader RefusalKind = "not_leader"
)

// Refusal is publish_refused's reason: serde's externally tagged enum, a
// string for the unit kinds, {"kind":{...}} for the others.
type Refusal struct {
	Kind     RefusalKind
	Expected uint64  // sequence_gap
	Tail     uint64  // offset_mismatch
	NodeID   string  // not_leader
	Addr     *string // not_leader, omitted when nil
}

// PublishRefused refuses an idempotent publish without writing it.
type PublishRefused struct {
	RequestID uint64
	Reason    Refusal
	Message   string
}

// StreamShards asks for a stream's width and routing.
type StreamShards struct {
	TenantID  string
	Namespace string
	Stream    string
	RequestID uint64
}

// StreamShardsView answers StreamShards. Shards 0 means unknown; Routing
// nil means modulo (routing.go).
type StreamShardsView struct {
	Shards    uint32
	RequestID uint64
	Routing   *string
}

func (*ProducerInit) Type() MessageType      { return TypeProducerInit }
func (*ProducerInitOK) Type() MessageType    { return TypeProducerInitOK }
func (*PublishIdempotent) Type() MessageType { return TypePublishIdempotent }
func (*PublishRefused) Type() MessageType    { return TypePublishRefused }
func (*StreamShards) Type() MessageType      { return TypeStreamShards }
func (*StreamShardsView) Type() MessageType  { return TypeStreamShardsView }

func (m *ProducerInit) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeProducerInit)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *ProducerInitOK) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeProducerInitOK)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	dst = appendUintField(dst, `,"producer_id":`, m.ProducerID)
	return append(dst, '}')
}

func (m *PublishIdempotent) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypePublishIdempotent)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"stream":`, m.Stream)
	dst = append(dst, `,"payloads":`...)
	dst = appendBase64Array(dst, m.Payloads)
	dst = appendOptBase64(dst, `,"key":`, m.Key)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	dst = appendUintField(dst, `,"producer_id":`, m.ProducerID)
	dst = appendUintField(dst, `,"sequence":`, m.Sequence)
	if m.Shard != nil {
		dst = appendUintField(dst, `,"shard":`, uint64(*m.Shard))
	}
	return append(dst, '}')
}

func (m *PublishRefused) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypePublishRefused)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	dst = append(dst, `,"reason":`...)
	dst = m.Reason.appendJSON(dst)
	dst = appendStrField(dst, `,"message":`, m.Message)
	return append(dst, '}')
}

func (r *Refusal) appendJSON(dst []byte) []byte {
	switch r.Kind {
	case RefusedSequenceGap:
		dst = appendUintField(dst, `{"sequence_gap":{"expected":`, r.Expected)
		return append(dst, "}}"...)
	case RefusedOffsetMismatch:
		dst = appendUintField(dst, `{"offset_mismatch":{"tail":`, r.Tail)
		return append(dst, "}}"...)
	case RefusedNotLeader:
		dst = appendStrField(dst, `{"not_leader":{"node_id":`, r.NodeID)
		if r.Addr != nil {
			dst = appendStrField(dst, `,"addr":`, *r.Addr)
		}
		return append(dst, "}}"...)
	}
	return appendString(dst, string(r.Kind))
}

func (m *StreamShards) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeStreamShards)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"stream":`, m.Stream)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *StreamShardsView) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeStreamShardsView)
	dst = appendUintField(dst, `,"shards":`, uint64(m.Shards))
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	if m.Routing != nil {
		dst = appendStrField(dst, `,"routing":`, *m.Routing)
	}
	return append(dst, '}')
}

func init() {
	jsonDecoders[TypeProducerInit] = func(f *fields) Message { return &ProducerInit{RequestID: f.u64("request_id")} }
	jsonDecoders[TypeProducerInitOK] = func(f *fields) Message {
		return &ProducerInitOK{RequestID: f.u64("request_id"), ProducerID: f.u64("producer_id")}
	}
	jsonDecoders[TypePublishIdempotent] = func(f *fields) Message {
		return &PublishIdempotent{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
			Payloads: f.bytesList("payloads"), Key: f.optBytes("key"), RequestID: f.u64("request_id"),
			ProducerID: f.u64("producer_id"), Sequence: f.u64("sequence"), Shard: f.optU32("shard"),
		}
	}
	jsonDecoders[TypePublishRefused] = func(f *fields) Message {
		return &PublishRefused{RequestID: f.u64("request_id"), Reason: f.refusal(), Message: f.str("message")}
	}
	jsonDecoders[TypeStreamShards] = func(f *fields) Message {
		return &StreamShards{TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
			RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeStreamShardsView] = func(f *fields) Message {
		return &StreamShardsView{Shards: uint32(f.reqUint("shards", 32)), RequestID: f.u64("request_id"), Routing: f.optStr("routing")}
	}
}

// refusal decodes publish_refused's reason. A kind this package does not
// know keeps its name (a client treats it as fatal).
func (f *fields) refusal() Refusal {
	v, ok := f.required("reason")
	if !ok {
		return Refusal{}
	}
	if v[0] == '"' {
		s, _ := f.text("reason", v)
		return Refusal{Kind: RefusalKind(s)}
	}
	var obj map[string]json.RawMessage
	if !f.unmarshal("reason", v, &obj) {
		return Refusal{}
	}
	if len(obj) != 1 {
		f.err = &MalformedJSONError{Field: "reason", Err: errors.New("want a string or an object with one member")}
		return Refusal{}
	}
	var r Refusal
	for k, body := range obj {
		r.Kind = RefusalKind(k)
		if bytes.Equal(bytes.TrimSpace(body), jsonNull) {
			continue
		}
		var fieldsOf struct {
			Expected *uint64 `json:"expected"`
			Tail     *uint64 `json:"tail"`
			NodeID   *string `json:"node_id"`
			Addr     *string `json:"addr"`
		}
		if !f.unmarshal("reason."+k, body, &fieldsOf) {
			return Refusal{}
		}
		if r.Kind == RefusedNotLeader {
			r.Addr = fieldsOf.Addr // no other reason carries one, nor writes it back
		}
		switch {
		case r.Kind == RefusedSequenceGap && fieldsOf.Expected != nil:
			r.Expected = *fieldsOf.Expected
		case r.Kind == RefusedOffsetMismatch && fieldsOf.Tail != nil:
			r.Tail = *fieldsOf.Tail
		case r.Kind == RefusedNotLeader && fieldsOf.NodeID != nil:
			r.NodeID = *fieldsOf.NodeID
		case r.Kind == RefusedSequenceGap || r.Kind == RefusedOffsetMismatch || r.Kind == RefusedNotLeader:
			f.err = &MissingFieldError{Type: f.typ, Field: "reason." + k}
		}
	}
	return r
}

// typedError decodes the code / retry / detail fields; absent code means
// none. An unknown code decodes as CodeUnknown keeping its retry class; an
// absent retry is the code's default; an unknown one reads as Fatal.
func (f *fields) typedError() *TypedError {
	code := f.optStr("code")
	if code == nil {
		return nil
	}
	c, _ := ParseErrorCode(*code)
	e := &TypedError{Code: c, Retry: c.DefaultRetry()}
	if r := f.optStr("retry"); r != nil {
		e.Retry = ParseRetryClass(*r)
	}
	if v, ok := f.raw("detail"); ok {
		var d struct {
			Reason       *string `json:"reason"`
			RetryAfterMs *uint64 `json:"retry_after_ms"`
		}
		if !f.unmarshal("detail", v, &d) {
			return nil
		}
		if d.Reason != nil {
			e.Reason = *d.Reason
		}
		if d.RetryAfterMs != nil {
			e.RetryAfterMs = *d.RetryAfterMs
		}
	}
	return e
}
