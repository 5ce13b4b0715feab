package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/felixmq/felix/wire"
)

// Cache is a handle on one cache of the client's tenant. Its requests are
// pipelined over one control stream: every call writes its request with a
// fresh request_id and waits for the reply with that id, so calls from many
// goroutines are in flight together and replies may come back out of
// order. A Cache is safe for concurrent use.
type Cache struct {
	c         *Client
	ct        *control
	namespace string
	name      string

	wmu  sync.Mutex
	wbuf []byte

	mu struct {
		sync.Mutex
		nextID  uint64
		pending map[uint64]chan cacheReply
		err     error // terminal: the stream ended
	}
	done chan struct{}
}

type cacheReply struct {
	m   wire.Message
	err error
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
	ct, err := c.openControl(ctx)
	if err != nil {
		return nil, err
	}
	if !wire.Supports(ct.flags, wire.CapCache) {
		ct.str.CancelRead(0)
		ct.str.CancelWrite(0)
		return nil, fmt.Errorf("%w: the broker does not support caches (no cache capability)", ErrProtocol)
	}
	k := &Cache{c: c, ct: ct, namespace: namespace, name: cache, done: make(chan struct{})}
	k.mu.pending = map[uint64]chan cacheReply{}
	c.wg.Add(1)
	go func() { defer c.wg.Done(); k.readReplies() }()
	return k, nil
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
		return nil, false, unexpected(r)
	}
	return v.Value, v.Found, nil
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
		return false, unexpected(r)
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
		return 0, unexpected(r)
	}
	return v.Value, nil
}

func unexpected(m wire.Message) error {
	return fmt.Errorf("%w: %s in reply to a cache request", ErrProtocol, m.Type())
}

// do sends the request build makes with a fresh request id and waits for
// its reply (a *CacheError when refused).
func (k *Cache) do(ctx context.Context, build func(id *uint64) wire.Message) (wire.Message, error) {
	ch := make(chan cacheReply, 1)
	k.mu.Lock()
	if err := k.mu.err; err != nil {
		k.mu.Unlock()
		return nil, err
	}
	k.mu.nextID++
	id := k.mu.nextID
	k.mu.pending[id] = ch
	k.mu.Unlock()

	k.wmu.Lock()
	k.wbuf = wire.AppendJSONFrame(k.wbuf[:0], build(&id))
	_, err := k.ct.str.Write(k.wbuf)
	k.wmu.Unlock()
	if err != nil {
		k.forget(id)
		return nil, k.ct.sess.wrap(fmt.Errorf("client: cache request: %w", err))
	}
	select {
	case r := <-ch:
		return r.m, r.err
	case <-ctx.Done():
		k.forget(id)
		return nil, ctx.Err()
	}
}

func (k *Cache) forget(id uint64) {
	k.mu.Lock()
	delete(k.mu.pending, id)
	k.mu.Unlock()
}

// readReplies hands each reply to the request with its id until the stream
// ends, then fails whatever is pending.
func (k *Cache) readReplies() {
	defer close(k.done)
	for {
		h, payload, err := k.ct.fr.Next()
		if err == nil && h.Flags != 0 {
			err = fmt.Errorf("%w: binary frame %s on a cache stream", ErrProtocol, h.Flags)
		}
		var m wire.Message
		if err == nil {
			m, err = wire.DecodeJSON(payload)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrClosed
			}
			k.failAll(k.ct.sess.wrap(err))
			return
		}
		k.dispatch(m)
	}
}

func (k *Cache) dispatch(m wire.Message) {
	var id *uint64
	r := cacheReply{m: m}
	switch m := m.(type) {
	case *wire.CacheOK:
		id = &m.RequestID
	case *wire.CacheValue:
		id = m.RequestID
	case *wire.CacheDeleted:
		id = m.RequestID
	case *wire.CounterValue:
		id = m.RequestID
	case *wire.CacheError:
		id, r = m.RequestID, cacheReply{err: &CacheError{Code: m.Code, Message: m.Message}}
	case *wire.ErrorMessage:
		// Uncorrelated: a frame the broker could not decode. Nothing to
		// complete; say so.
		k.c.cfg.Logger.Warn("broker error on cache stream", "message", m.Message)
	}
	if id == nil {
		return
	}
	k.mu.Lock()
	ch := k.mu.pending[*id]
	delete(k.mu.pending, *id)
	k.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

func (k *Cache) failAll(err error) {
	k.mu.Lock()
	if k.mu.err == nil {
		k.mu.err = err
	}
	pending := k.mu.pending
	k.mu.pending = map[uint64]chan cacheReply{}
	k.mu.Unlock()
	for _, ch := range pending {
		ch <- cacheReply{err: err}
	}
}

// Close finishes the stream once the replies to every request in flight
// arrived (or ctx ended) and waits for the reader.
func (k *Cache) Close(ctx context.Context) error {
	k.wmu.Lock()
	k.ct.str.Close()
	k.wmu.Unlock()
	select {
	case <-k.done:
	case <-ctx.Done():
		k.ct.str.CancelRead(0)
		<-k.done
	}
	return nil
}
