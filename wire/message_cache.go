package wire

import "strconv"

// Cache additions (Felix-Go, capability CapCache): delete, counters, keyed
// watch and a correlated error reply. Like every addition they are new
// message types, never a change to a v1 byte; docs/protocol.md has the JSON.
// Requests without RequestID are one-shot, as the v1 cache_get: the broker
// answers once and closes the stream.

// CacheDelete removes Key. Answered by CacheDeleted.
type CacheDelete struct {
	TenantID  string
	Namespace string
	Cache     string
	Key       string
	RequestID *uint64
}

// CacheDeleted answers CacheDelete; Existed says whether a live (unexpired)
// value was removed.
type CacheDeleted struct {
	RequestID *uint64
	Existed   bool
}

// CounterAdd adds Delta to the counter at Key (absent counts as 0) and is
// answered by CounterValue with the new sum, in one round trip.
type CounterAdd struct {
	TenantID  string
	Namespace string
	Cache     string
	Key       string
	Delta     int64
	RequestID *uint64
}

// CounterGet reads the counter at Key. Answered by CounterValue.
type CounterGet struct {
	TenantID  string
	Namespace string
	Cache     string
	Key       string
	RequestID *uint64
}

// CounterValue answers CounterAdd and CounterGet. An absent key reads 0.
type CounterValue struct {
	TenantID  string
	Namespace string
	Cache     string
	Key       string
	Value     int64
	RequestID *uint64
}

// Watch asks for every later put and delete of Key on an event stream of
// its own, exactly like a subscription: the broker replies Subscribed with
// the watch's id and opens an event stream that starts with
// EventStreamHello. Current asks for the key's current state first.
type Watch struct {
	TenantID  string
	Namespace string
	Cache     string
	Key       string
	Current   *bool
}

// CacheErrorCode classifies a refused cache request.
type CacheErrorCode string

// Cache error codes (docs/protocol.md).
const (
	CacheErrNotFound      CacheErrorCode = "cache_not_found"
	CacheErrInvalid       CacheErrorCode = "invalid_request"
	CacheErrForbidden     CacheErrorCode = "forbidden"
	CacheErrValueTooLarge CacheErrorCode = "value_too_large"
	CacheErrNotCounter    CacheErrorCode = "not_a_counter"
	CacheErrOverflow      CacheErrorCode = "counter_overflow"
	CacheErrUnavailable   CacheErrorCode = "unavailable"
)

// Typed is the typed error code, with its default retry class, that a
// cache error code stands for: cache_error keeps its finer Felix-Go codes,
// and a client classifies them through this table.
func (c CacheErrorCode) Typed() *TypedError {
	code := CodeInternal
	switch c {
	case CacheErrNotFound:
		code = CodeNotFound
	case CacheErrInvalid, CacheErrNotCounter, CacheErrOverflow:
		code = CodeInvalidRequest
	case CacheErrForbidden:
		code = CodeForbidden
	case CacheErrValueTooLarge:
		code = CodeLimitExceeded
	case CacheErrUnavailable:
		code = CodeShardUnavailable
	}
	return NewTypedError(code)
}

// CacheError refuses a cache request. RequestID correlates it when the
// request carried one (the v1 error message cannot be correlated under
// pipelining).
type CacheError struct {
	RequestID *uint64
	Code      CacheErrorCode
	Message   string
}

func (*CacheDelete) Type() MessageType  { return TypeCacheDelete }
func (*CacheDeleted) Type() MessageType { return TypeCacheDeleted }
func (*CounterAdd) Type() MessageType   { return TypeCounterAdd }
func (*CounterGet) Type() MessageType   { return TypeCounterGet }
func (*CounterValue) Type() MessageType { return TypeCounterValue }
func (*Watch) Type() MessageType        { return TypeWatch }
func (*CacheError) Type() MessageType   { return TypeCacheError }

func (m *CacheDelete) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCacheDelete)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"cache":`, m.Cache)
	dst = appendStrField(dst, `,"key":`, m.Key)
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *CacheDeleted) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCacheDeleted)
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	dst = append(dst, `,"existed":`...)
	dst = strconv.AppendBool(dst, m.Existed)
	return append(dst, '}')
}

func (m *CounterAdd) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCounterAdd)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"cache":`, m.Cache)
	dst = appendStrField(dst, `,"key":`, m.Key)
	dst = append(dst, `,"delta":`...)
	dst = strconv.AppendInt(dst, m.Delta, 10)
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *CounterGet) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCounterGet)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"cache":`, m.Cache)
	dst = appendStrField(dst, `,"key":`, m.Key)
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *CounterValue) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCounterValue)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"cache":`, m.Cache)
	dst = appendStrField(dst, `,"key":`, m.Key)
	dst = append(dst, `,"value":`...)
	dst = strconv.AppendInt(dst, m.Value, 10)
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	return append(dst, '}')
}

func (m *Watch) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeWatch)
	dst = appendTopic(dst, m.TenantID, m.Namespace, `,"cache":`, m.Cache)
	dst = appendStrField(dst, `,"key":`, m.Key)
	if m.Current != nil {
		dst = append(dst, `,"current":`...)
		dst = strconv.AppendBool(dst, *m.Current)
	}
	return append(dst, '}')
}

func (m *CacheError) AppendJSON(dst []byte) []byte {
	dst = appendHead(dst, TypeCacheError)
	dst = appendOptUint(dst, `,"request_id":`, m.RequestID)
	dst = appendStrField(dst, `,"code":`, string(m.Code))
	dst = appendStrField(dst, `,"message":`, m.Message)
	return append(dst, '}')
}

// The decoders of the cache additions, registered with the table in
// json_decode_messages.go (kept here so the additions live in one file).
func init() {
	jsonDecoders[TypeCacheDelete] = func(f *fields) Message {
		return &CacheDelete{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Cache: f.str("cache"), Key: f.str("key"),
			RequestID: f.optU64("request_id"),
		}
	}
	jsonDecoders[TypeCacheDeleted] = func(f *fields) Message {
		return &CacheDeleted{RequestID: f.optU64("request_id"), Existed: f.boolean("existed")}
	}
	jsonDecoders[TypeCounterAdd] = func(f *fields) Message {
		return &CounterAdd{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Cache: f.str("cache"), Key: f.str("key"),
			Delta: f.i64("delta"), RequestID: f.optU64("request_id"),
		}
	}
	jsonDecoders[TypeCounterGet] = func(f *fields) Message {
		return &CounterGet{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Cache: f.str("cache"), Key: f.str("key"),
			RequestID: f.optU64("request_id"),
		}
	}
	jsonDecoders[TypeCounterValue] = func(f *fields) Message {
		return &CounterValue{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Cache: f.str("cache"), Key: f.str("key"),
			Value: f.i64("value"), RequestID: f.optU64("request_id"),
		}
	}
	jsonDecoders[TypeWatch] = func(f *fields) Message {
		return &Watch{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Cache: f.str("cache"), Key: f.str("key"),
			Current: f.optBool("current"),
		}
	}
	jsonDecoders[TypeCacheError] = func(f *fields) Message {
		return &CacheError{RequestID: f.optU64("request_id"), Code: CacheErrorCode(f.str("code")), Message: f.str("message")}
	}
}

func (f *fields) i64(name string) int64 {
	var n int64
	if v, ok := f.required(name); ok {
		f.unmarshal(name, v, &n)
	}
	return n
}

func (f *fields) boolean(name string) bool {
	var b bool
	if v, ok := f.required(name); ok {
		f.unmarshal(name, v, &b)
	}
	return b
}

func (f *fields) optBool(name string) *bool {
	v, ok := f.raw(name)
	if !ok {
		return nil
	}
	var b bool
	if !f.unmarshal(name, v, &b) {
		return nil
	}
	return &b
}
