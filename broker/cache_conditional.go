package broker

import (
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/wire"
)

// Conditional writes (cache_put_if, cache_delete_if): the check and the
// write are one step under the cache's lock, so no other change of the key
// lands between them, and every change is ordered there: of two writers
// that read version v and write "if version v", exactly one applies. A
// key's version is the revision of the write that produced its value (the
// log offset in a durable cache, which only grows; a counter started at
// the wall clock's microseconds in an ephemeral one, so a version read
// before a restart matches nothing after it). The answer waits for the
// same durability as a plain put, applied or not: a refusal names a
// version that a crash cannot take back.

// condResult is the outcome of a conditional write: whether it applied,
// and the version that answers it (nil: the key has no live entry).
type condResult struct {
	applied bool
	version *uint64
}

func liveVersion(e *cacheEntry, ok bool) *uint64 {
	if !ok {
		return nil
	}
	v := e.rev
	return &v
}

// putIf stores value under key only if cond holds for the key's live
// entry; see put. done gets the result, the applied put's version or the
// key's current one.
func (c *cache) putIf(key string, value []byte, ttl time.Duration, cond wire.Condition, done func(condResult, error)) error {
	expires, now, err := c.checkPut(key, value, ttl)
	if err != nil {
		return err
	}
	c.mu.Lock()
	e, ok := c.mu.store.get(key, now)
	met := (cond.Kind == wire.ConditionAbsent && !ok) || (cond.Kind == wire.ConditionVersion && ok && e.rev == cond.Version)
	if !met {
		res := condResult{version: liveVersion(e, ok)}
		ack, err := c.barrierLocked(func(err error) { done(res, err) })
		c.mu.Unlock()
		if err == nil {
			ack()
		}
		return err
	}
	// The put is the change's first record: its revision is the next one.
	// It is known before the change, whose done may run before
	// changeLocked returns.
	version := c.nextRevLocked()
	res := condResult{applied: true, version: &version}
	ack, err := c.changeLocked(c.mu.store.putRecords(key, value, expires), now, func(err error) { done(res, err) })
	c.mu.Unlock()
	if err == nil {
		ack()
	}
	return err
}

// deleteIf removes key only if its live entry has version.
func (c *cache) deleteIf(key string, version uint64, done func(condResult, error)) error {
	if err := checkKey(key); err != nil {
		return err
	}
	now := nowMs()
	c.mu.Lock()
	e, ok := c.mu.store.get(key, now)
	var ack func()
	var err error
	if ok && e.rev == version {
		recs := []wire.CacheRecord{{Op: wire.CacheOpDelete, Key: []byte(key)}}
		ack, err = c.changeLocked(recs, now, func(err error) { done(condResult{applied: true}, err) })
	} else {
		res := condResult{version: liveVersion(e, ok)}
		ack, err = c.barrierLocked(func(err error) { done(res, err) })
	}
	c.mu.Unlock()
	if err == nil {
		ack()
	}
	return err
}

// nextRevLocked is the revision the next change's first record gets.
func (c *cache) nextRevLocked() uint64 {
	if c.d != nil {
		return c.d.log.Next() // the cache is its log's only writer, under mu
	}
	return c.mu.rev
}

// barrierLocked runs done once every change ordered so far is durable per
// the cache's fsync mode (at once for an ephemeral cache, through the
// returned ack once mu is released).
func (c *cache) barrierLocked(done func(error)) (func(), error) {
	if c.d == nil {
		return func() { done(nil) }, nil
	}
	next := c.d.log.Next()
	if err := c.d.seq.Reserve(next, next, done); err != nil {
		return nil, err
	}
	return func() {}, nil
}

func (ct *control) cachePutIf(m *wire.CachePutIf) bool {
	c, err := ct.resolveCache(cacheKey(m.TenantID, m.Namespace, m.Cache), auth.ActionCacheWrite)
	if err != nil {
		return ct.cacheFail(&m.RequestID, err)
	}
	ttl, err := ttlOf(m.TTLMs)
	if err != nil {
		return ct.cacheFail(&m.RequestID, err)
	}
	if m.Condition.Kind != wire.ConditionAbsent && m.Condition.Kind != wire.ConditionVersion {
		return ct.cacheFail(&m.RequestID, cacheErr(wire.CacheErrInvalid, "no condition"))
	}
	return ct.change(opPutIf, &m.RequestID, func(finish func(wire.Message, error)) error {
		return c.putIf(m.Key, m.Value, ttl, m.Condition, func(r condResult, err error) {
			finish(&wire.CacheConditionResult{Applied: r.applied, Version: r.version, RequestID: m.RequestID}, err)
		})
	})
}

func (ct *control) cacheDeleteIf(m *wire.CacheDeleteIf) bool {
	c, err := ct.resolveCache(cacheKey(m.TenantID, m.Namespace, m.Cache), auth.ActionCacheWrite)
	if err != nil {
		return ct.cacheFail(&m.RequestID, err)
	}
	return ct.change(opDeleteIf, &m.RequestID, func(finish func(wire.Message, error)) error {
		return c.deleteIf(m.Key, m.Version, func(r condResult, err error) {
			finish(&wire.CacheConditionResult{Applied: r.applied, Version: r.version, RequestID: m.RequestID}, err)
		})
	})
}
