package wire

import (
	"bytes"
	"encoding/json"
	"errors"
)

// jsonDecoders builds each message from its fields in spec order, so the
// first missing field reported is the first one serde would report.
var jsonDecoders = [numTypes]func(*fields) Message{
	TypeAuth: func(f *fields) Message {
		return &Auth{
			TenantID: f.str("tenant_id"), Token: f.str("token"), ClientFlags: f.optU16("client_flags"),
			ClientFeatures: f.optU32("client_features"), ClientFeaturesHi: f.optU32("client_features_hi"),
			ClientCaps: f.optU32("client_caps"),
		}
	},
	TypeAuthOK: func(f *fields) Message {
		return &AuthOK{
			ServerFlags: f.u16("server_flags"), ServerFeatures: f.optU32("server_features"),
			ServerFeaturesHi: f.optU32("server_features_hi"), ServerCaps: f.optU32("server_caps"),
		}
	},
	TypePublish: func(f *fields) Message {
		return &Publish{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
			Payload: f.bytes("payload"), Key: f.optBytes("key"), RequestID: f.optU64("request_id"), Ack: f.ack(),
			Shard: f.optU32("shard"),
		}
	},
	TypePublishBatch: func(f *fields) Message {
		return &PublishBatchMessage{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
			Payloads: f.bytesList("payloads"), Key: f.optBytes("key"), RequestID: f.optU64("request_id"), Ack: f.ack(),
			Shard: f.optU32("shard"),
		}
	},
	TypeSubscribe: func(f *fields) Message {
		return &Subscribe{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
			SubscriptionID: f.optU64("subscription_id"), Start: f.start(), Shard: f.optU32("shard"),
		}
	},
	TypeSubscribed: func(f *fields) Message {
		return &Subscribed{SubscriptionID: f.u64("subscription_id"), StartOffset: f.optU64("start_offset")}
	},
	TypeEventStreamHello: func(f *fields) Message { return &EventStreamHello{SubscriptionID: f.u64("subscription_id")} },
	TypeEvent: func(f *fields) Message {
		return &Event{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
			Payload: f.bytes("payload"), Offset: f.optU64("offset"),
		}
	},
	TypeEventBatch: func(f *fields) Message {
		return &EventBatchMessage{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Stream: f.str("stream"),
			Payloads: f.bytesList("payloads"), BaseOffset: f.optU64("base_offset"),
		}
	},
	TypeCachePut: func(f *fields) Message {
		return &CachePut{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Cache: f.str("cache"), Key: f.str("key"),
			Value: f.bytes("value"), RequestID: f.optU64("request_id"), TTLMs: f.optU64("ttl_ms"),
		}
	},
	TypeCacheGet: func(f *fields) Message {
		return &CacheGet{
			TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Cache: f.str("cache"), Key: f.str("key"),
			RequestID: f.optU64("request_id"),
		}
	},
	TypeCacheValue: decodeCacheValue,
	TypeCacheOK:    func(f *fields) Message { return &CacheOK{RequestID: f.u64("request_id")} },
	TypePublishOK: func(f *fields) Message {
		return &PublishOK{RequestID: f.u64("request_id"), Offset: f.optU64("offset"), Shard: f.optU32("shard"), Owner: f.owner()}
	},
	TypePublishError: func(f *fields) Message {
		return &PublishError{RequestID: f.u64("request_id"), Message: f.str("message"), Err: f.typedError(),
			Shard: f.optU32("shard"), Owner: f.owner()}
	},
	TypeOK: func(*fields) Message { return &OK{} },
	TypeError: func(f *fields) Message {
		return &ErrorMessage{Message: f.str("message"), Err: f.typedError(), Shard: f.optU32("shard"), Owner: f.owner()}
	},
	TypeSubscribeCursorError: func(f *fields) Message {
		return &SubscribeCursorError{Reason: f.reason(), Requested: f.u64("requested"), Available: f.u64("available")}
	},
	TypeSubscriptionGap: func(f *fields) Message {
		return &SubscriptionGap{SubscriptionID: f.u64("subscription_id"), Dropped: f.u64("dropped")}
	},
}

func decodeCacheValue(f *fields) Message {
	m := &CacheValue{TenantID: f.str("tenant_id"), Namespace: f.str("namespace"), Cache: f.str("cache"), Key: f.str("key")}
	if v, ok := f.raw("value"); ok {
		m.Value = f.b64Value("value", v)
		m.Found = f.err == nil
	}
	m.RequestID, m.Version = f.optU64("request_id"), f.optU64("version")
	return m
}

func (f *fields) ack() *AckMode {
	v, ok := f.raw("ack")
	if !ok {
		return nil
	}
	s, ok := f.text("ack", v)
	if !ok {
		return nil
	}
	m, ok := ParseAckMode(s)
	if !ok {
		f.err = &MalformedJSONError{Field: "ack", Err: errors.New("unknown ack mode " + s)}
		return nil
	}
	return &m
}

func (f *fields) reason() CursorReason {
	s := f.str("reason")
	if f.err == nil && s != string(CursorTooOld) && s != string(CursorInFuture) {
		f.err = &MalformedJSONError{Field: "reason", Err: errors.New("unknown cursor error reason " + s)}
	}
	return CursorReason(s)
}

// start decodes serde's externally tagged SubscribeStart: "latest",
// "earliest" or an object whose only key is "offset".
func (f *fields) start() *Start {
	v, ok := f.raw("start")
	if !ok {
		return nil
	}
	if v[0] == '"' {
		var s string
		if !f.unmarshal("start", v, &s) {
			return nil
		}
		switch s {
		case "latest":
			return &Start{Kind: StartLatest}
		case "earliest":
			return &Start{Kind: StartEarliest}
		}
		f.err = &MalformedJSONError{Field: "start", Err: errors.New("unknown start " + s)}
		return nil
	}
	var obj map[string]json.RawMessage
	if !f.unmarshal("start", v, &obj) {
		return nil
	}
	off, ok := obj["offset"]
	if len(obj) != 1 || !ok || bytes.Equal(bytes.TrimSpace(off), jsonNull) {
		f.err = &MalformedJSONError{Field: "start", Err: errors.New(`want "latest", "earliest" or {"offset":n}`)}
		return nil
	}
	s := &Start{Kind: StartOffset}
	if !f.unmarshal("start.offset", off, &s.Offset) {
		return nil
	}
	return s
}
