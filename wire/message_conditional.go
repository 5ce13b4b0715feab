package wire

import (
	"errors"
	"strconv"
)

var errBadCondition = errors.New(`want "absent" or {"version":n}`)

// Conditional cache writes and reads by time, as the published Felix 0.6
// defines them (FeatureCacheConditional, FeatureRecordTimestamps).

// ConditionKind says what a cache_put_if requires of the key.
type ConditionKind uint8

const (
	// ConditionAbsent: the key has no live entry.
	ConditionAbsent ConditionKind = iota + 1
	// ConditionVersion: the key's live entry has Version.
	ConditionVersion
)

// Condition is cache_put_if's condition: "absent" or {"version": n}.
type Condition struct {
	Kind    ConditionKind
	Version uint64
}

// CachePutIf stores Value under Key only if the key's current entry meets
// Condition; answered with CacheConditionResult.
type CachePutIf struct {
	TenantID  string
	Namespace string
	Cache     string
	Key       string
	Value     []byte
	TTLMs     *uint64
	Condition Condition
	RequestID uint64
}

// CacheDeleteIf removes Key only if its live entry has Version; answered
// with CacheConditionResult.
type CacheDeleteIf struct {
	TenantID  string
	Namespace string
	Cache     string
	Key       string
	Version   uint64
	RequestID uint64
}

// CacheConditionResult answers a conditional write: whether it was made,
// and the version that answers it (the one written, else the key's
// current one; absent when the key has no live entry).
type CacheConditionResult struct {
	Applied   bool
	Version   *uint64
	RequestID uint64
}

// OffsetForTime asks for the first offset of a durable stream shard whose
// record was appended at or after AtMicros; answered with OffsetValue.
type OffsetForTime struct {
	TenantID  string
	Namespace string
	Stream    string
	Shard     uint32
	AtMicros  uint64
	RequestID uint64
}

// OffsetValue answers OffsetForTime; Offset is absent when no readable
// record is that recent.
type OffsetValue struct {
	Offset    *uint64
	RequestID uint64
}

func (*CachePutIf) Type() MessageType           { return TypeCachePutIf }
func (*CacheDeleteIf) Type() MessageType        { return TypeCacheDeleteIf }
func (*CacheConditionResult) Type() MessageType { return TypeCacheConditionResult }
func (*OffsetForTime) Type() MessageType        { return TypeOffsetForTime }
func (*OffsetValue) Type() MessageType          { return TypeOffsetValue }

func (m *CachePutIf) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCachePutIf)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"cache":`, m.Cache)
	dst = appendStrField(dst, `,"key":`, m.Key)
	dst = append(dst, `,"value":`...)
	dst = appendBase64(dst, m.Value)
	dst = appendOptUint(dst, `,"ttl_ms":`, m.TTLMs)
	dst = append(dst, `,"condition":`...)
	switch m.Condition.Kind {
	case ConditionAbsent:
		dst = append(dst, `"absent"`...)
	case ConditionVersion:
		dst = append(dst, `{"version":`...)
		dst = appendUint(dst, m.Condition.Version)
		dst = append(dst, '}')
	default: // a string no decoder accepts, so the bug surfaces at the peer
		dst = appendString(dst, "condition("+strconv.Itoa(int(m.Condition.Kind))+")")
	}
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *CacheDeleteIf) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCacheDeleteIf)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"cache":`, m.Cache)
	dst = appendStrField(dst, `,"key":`, m.Key)
	dst = appendUintField(dst, `,"version":`, m.Version)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *CacheConditionResult) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCacheConditionResult)
	dst = append(dst, `,"applied":`...)
	dst = strconv.AppendBool(dst, m.Applied)
	dst = appendOptUint(dst, `,"version":`, m.Version)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *OffsetForTime) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeOffsetForTime)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"stream":`, m.Stream)
	dst = appendUintField(dst, `,"shard":`, uint64(m.Shard))
	dst = appendUintField(dst, `,"at_micros":`, m.AtMicros)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *OffsetValue) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeOffsetValue)
	dst = appendOptUint(dst, `,"offset":`, m.Offset)
	dst = appendUintField(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

// condition decodes "absent" or {"version": n}; anything else is
// malformed.
func (f *fields) condition() Condition {
	v, ok := f.required("condition")
	if !ok {
		return Condition{}
	}
	if v[0] == '"' {
		if s, ok := f.text("condition", v); ok && s == "absent" {
			return Condition{Kind: ConditionAbsent}
		}
	} else if obj, ok := splitObject(v, nil); ok && len(obj) == 1 && string(obj[0].name) == "version" {
		sub := fields{typ: f.typ, obj: obj}
		c := Condition{Kind: ConditionVersion, Version: sub.u64("version")}
		if sub.err == nil {
			return c
		}
	}
	if f.err == nil {
		f.err = &MalformedJSONError{Field: "condition", Err: errBadCondition}
	}
	return Condition{}
}

func init() {
	jsonDecoders[TypeCachePutIf] = func(f *fields) Message {
		return &CachePutIf{TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Cache: f.str("cache"),
			Key: f.str("key"), Value: f.bytes("value"), TTLMs: f.optU64("ttl_ms"), Condition: f.condition(),
			RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeCacheDeleteIf] = func(f *fields) Message {
		return &CacheDeleteIf{TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Cache: f.str("cache"),
			Key: f.str("key"), Version: f.u64("version"), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeCacheConditionResult] = func(f *fields) Message {
		return &CacheConditionResult{Applied: f.boolean("applied"), Version: f.optU64("version"), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeOffsetForTime] = func(f *fields) Message {
		return &OffsetForTime{TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
			Shard: uint32(f.reqUint("shard", 32)), AtMicros: f.u64("at_micros"), RequestID: f.u64("request_id")}
	}
	jsonDecoders[TypeOffsetValue] = func(f *fields) Message {
		return &OffsetValue{Offset: f.optU64("offset"), RequestID: f.u64("request_id")}
	}
}
