package client

import (
	"context"
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// Cache is a handle on one cache of the client's tenant. Its requests are
// pipelined over one control stream (reqStream), so calls from many
// goroutines are in flight together. A Cache is safe for concurrent use.
type Cache struct {
	*reqStream
	c         *Client
	namespace string
	name      string
}

// CacheError is the broker's typed refusal of a cache request.
type CacheError struct {
	Code    wire.CacheErrorCode
	Message string
}

func (e *CacheError) Error() string { return fmt.Sprintf("broker: %s: %s", e.Code, e.Message) }

// Typed is the typed error code and retry class the cache code stands for
// (wire.CacheErrorCode.Typed).
func (e *CacheError) Typed() *wire.TypedError { return e.Code.Typed() }

// Is matches the sentinels of the typed code the cache code stands for
// (ErrNotFound for cache_not_found, ErrForbidden, ...).
func (e *CacheError) Is(target error) bool {
	code, ok := codeErrors[target]
	return ok && e.Typed().Code == code
}

// OpenCache opens a handle on namespace/cache. The broker must support
// the cache additions (CapCache).
func (c *Client) OpenCache(ctx context.Context, namespace, cache string) (*Cache, error) {
	rs, err := c.openReqStream(ctx, "cache", func(ct *control) error {
		if !wire.Supports(ct.flags, wire.CapCache) {
			return fmt.Errorf("%w: the broker does not support caches (no cache capability)", ErrProtocol)
		}
		return nil
	}, correlateCache)
	if err != nil {
		return nil, err
	}
	return &Cache{reqStream: rs, c: c, namespace: namespace, name: cache}, nil
}

// Put stores value under key; ttl 0 means no expiry. It returns once the
// broker acknowledged the put (for an on_commit durable cache: once it is
// on disk).
func (k *Cache) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	m := &wire.CachePut{TenantID: k.c.cfg.Tenant, Namespace: k.namespace, Cache: k.name, Key: key, Value: value}
	if ttl > 0 {
		ms := uint64(max(ttl.Milliseconds(), 1))
		m.TTLMs = &ms
	}
	_, err := k.do(ctx, func(id *uint64) wire.Message { m.RequestID = id; return m })
	return err
}

// Get returns the value of key and whether it was found (absent and
// expired keys are not).
func (k *Cache) Get(ctx context.Context, key string) ([]byte, bool, error) {
	r, err := k.do(ctx, func(id *uint64) wire.Message {
		return &wire.CacheGet{TenantID: k.c.cfg.Tenant, Namespace: k.namespace, Cache: k.name, Key: key, RequestID: id}
	})
	if err != nil {
		return nil, false, err
	}
	v, ok := r.(*wire.CacheValue)
	if !ok {
		return nil, false, unexpected(r, "cache")
	}
	return v.Value, v.Found, nil
}

// GetVersion is Get with the value's version, for PutIf and DeleteIf to
// compare against. The broker must serve conditional writes
// (wire.FeatureCacheConditional).
func (k *Cache) GetVersion(ctx context.Context, key string) (value []byte, version uint64, found bool, err error) {
	if err := k.needConditional(); err != nil {
		return nil, 0, false, err
	}
	r, err := k.do(ctx, func(id *uint64) wire.Message {
		return &wire.CacheGet{TenantID: k.c.cfg.Tenant, Namespace: k.namespace, Cache: k.name, Key: key, RequestID: id}
	})
	if err != nil {
		return nil, 0, false, err
	}
	v, ok := r.(*wire.CacheValue)
	if !ok || (v.Found && v.Version == nil) {
		return nil, 0, false, unexpected(r, "cache")
	}
	if v.Found {
		version = *v.Version
	}
	return v.Value, version, v.Found, nil
}

// Condition is what PutIf requires of the key: absent (no live entry),
// or a live entry of a version.
type Condition = wire.Condition

// IfAbsent is the condition of a create-only put.
var IfAbsent = Condition{Kind: wire.ConditionAbsent}

// IfVersion is the condition of an update of exactly version v.
func IfVersion(v uint64) Condition { return Condition{Kind: wire.ConditionVersion, Version: v} }

// PutIf stores value under key only if cond holds, checked and written as
// one step on the broker (of two writers expecting the same version,
// exactly one applies). It returns whether it applied and the version that
// answers: the one it wrote, else the key's current one (found false when
// the key has no live entry). A refusal is an answer, not an error.
func (k *Cache) PutIf(ctx context.Context, key string, value []byte, ttl time.Duration, cond Condition) (applied bool, version uint64, found bool, err error) {
	if err := k.needConditional(); err != nil {
		return false, 0, false, err
	}
	m := &wire.CachePutIf{TenantID: k.c.cfg.Tenant, Namespace: k.namespace, Cache: k.name, Key: key, Value: value, Condition: cond}
	if ttl > 0 {
		ms := uint64(max(ttl.Milliseconds(), 1))
		m.TTLMs = &ms
	}
	return k.conditional(ctx, func(id uint64) wire.Message { m.RequestID = id; return m })
}

// DeleteIf removes key only if its live entry has version (a lease holder
// releasing its own lease, not one someone has since taken).
func (k *Cache) DeleteIf(ctx context.Context, key string, version uint64) (applied bool, current uint64, found bool, err error) {
	if err := k.needConditional(); err != nil {
		return false, 0, false, err
	}
	return k.conditional(ctx, func(id uint64) wire.Message {
		return &wire.CacheDeleteIf{TenantID: k.c.cfg.Tenant, Namespace: k.namespace, Cache: k.name, Key: key, Version: version, RequestID: id}
	})
}

func (k *Cache) conditional(ctx context.Context, build func(id uint64) wire.Message) (bool, uint64, bool, error) {
	r, err := k.reqStream.do(ctx, build)
	if err != nil {
		return false, 0, false, err
	}
	res, ok := r.(*wire.CacheConditionResult)
	if !ok {
		return false, 0, false, unexpected(r, "cache")
	}
	if res.Version == nil {
		return res.Applied, 0, false, nil
	}
	return res.Applied, *res.Version, true, nil
}

func (k *Cache) needConditional() error {
	if !k.ct.features.Has(wire.FeatureCacheConditional) {
		return fmt.Errorf("%w: the broker does not serve conditional cache writes", ErrNotNegotiated)
	}
	return nil
}

// Delete removes key and reports whether a live value was there.
func (k *Cache) Delete(ctx context.Context, key string) (bool, error) {
	r, err := k.do(ctx, func(id *uint64) wire.Message {
		return &wire.CacheDelete{TenantID: k.c.cfg.Tenant, Namespace: k.namespace, Cache: k.name, Key: key, RequestID: id}
	})
	if err != nil {
		return false, err
	}
	d, ok := r.(*wire.CacheDeleted)
	if !ok {
		return false, unexpected(r, "cache")
	}
	return d.Existed, nil
}

// CounterAdd adds delta to the counter at key (absent counts as 0) and
// returns the new value, in one round trip.
func (k *Cache) CounterAdd(ctx context.Context, key string, delta int64) (int64, error) {
	r, err := k.do(ctx, func(id *uint64) wire.Message {
		return &wire.CounterAdd{TenantID: k.c.cfg.Tenant, Namespace: k.namespace, Cache: k.name, Key: key, Delta: delta, RequestID: id}
	})
	return counterValue(r, err)
}

// CounterGet reads the counter at key; absent reads 0.
func (k *Cache) CounterGet(ctx context.Context, key string) (int64, error) {
	r, err := k.do(ctx, func(id *uint64) wire.Message {
		return &wire.CounterGet{TenantID: k.c.cfg.Tenant, Namespace: k.namespace, Cache: k.name, Key: key, RequestID: id}
	})
	return counterValue(r, err)
}

func counterValue(r wire.Message, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	v, ok := r.(*wire.CounterValue)
	if !ok {
		return 0, unexpected(r, "cache")
	}
	return v.Value, nil
}

// do sends the request build makes with a fresh request id and waits for
// its reply (a *CacheError when refused).
func (k *Cache) do(ctx context.Context, build func(id *uint64) wire.Message) (wire.Message, error) {
	return k.reqStream.do(ctx, func(id uint64) wire.Message { return build(&id) })
}

// correlateCache is the request a cache reply answers.
func correlateCache(m wire.Message) (*uint64, error) {
	switch m := m.(type) {
	case *wire.CacheOK:
		return &m.RequestID, nil
	case *wire.CacheValue:
		return m.RequestID, nil
	case *wire.CacheDeleted:
		return m.RequestID, nil
	case *wire.CounterValue:
		return m.RequestID, nil
	case *wire.CacheConditionResult:
		return &m.RequestID, nil
	case *wire.CacheError:
		return m.RequestID, &CacheError{Code: m.Code, Message: m.Message}
	}
	return nil, nil
}

// Close finishes the stream once the replies to every request in flight
// arrived (or ctx ended) and waits for the reader.
func (k *Cache) Close(ctx context.Context) error { return k.close(ctx) }
