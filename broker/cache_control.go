package broker

import (
	"errors"
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/wire"
)

// Cache requests on a control stream. Each is handled in arrival order;
// changes are acknowledged when durable per the cache's fsync mode, out of
// order with other replies (correlate by request_id). A request without
// request_id is one-shot, as the published broker's cache_put and
// cache_get: it is answered once (reply or error) and the stream ends.

// handleCache dispatches the cache messages; handled false means m is not
// one of them.
func (ct *control) handleCache(m wire.Message) (handled, keep bool) {
	// Reads are timed here; changes from start to their outcome (change).
	fm, start := &ct.broker().metrics.features, time.Now()
	switch m := m.(type) {
	case *wire.CachePut:
		return true, ct.cachePut(m)
	case *wire.CacheGet:
		keep = ct.cacheGet(m)
		fm.cacheOp(opGet, start)
		return true, keep
	case *wire.CacheDelete:
		return true, ct.cacheDelete(m)
	case *wire.CachePutIf:
		return true, ct.cachePutIf(m)
	case *wire.CacheDeleteIf:
		return true, ct.cacheDeleteIf(m)
	case *wire.CounterAdd:
		return true, ct.counterAdd(m)
	case *wire.CounterGet:
		keep = ct.counterGet(m)
		fm.cacheOp(opCounterGet, start)
		return true, keep
	case *wire.Watch:
		fm.cacheOp(opWatch, start)
		return true, ct.watch(m)
	}
	return false, true
}

func cacheKey(t, ns, c string) CacheKey { return CacheKey{Tenant: t, Namespace: ns, Cache: c} }

func cacheResource(k CacheKey) string { return "cache:" + k.String() }

// resolveCache checks tenant and permission and finds the cache.
func (ct *control) resolveCache(k CacheKey, action auth.Action) (*cache, error) {
	if k.Tenant != ct.principal.Tenant() {
		return nil, errTenantMismatch
	}
	if err := ct.principal.Check(action, cacheResource(k)); err != nil {
		return nil, forbidden(err, action, "cache "+k.String())
	}
	if action == auth.ActionCacheWrite && ct.broker().draining.Load() {
		return nil, cacheErr(wire.CacheErrUnavailable, "%v", ErrDraining)
	}
	return ct.broker().caches.lookup(k)
}

// cacheFail answers a refused request. Peers that negotiated CapCache get a
// typed, correlated cache_error; v1 peers get the uncorrelated error
// message the published broker sends. It returns whether the stream goes
// on: not after a forbidden request, nor after a one-shot request.
func (ct *control) cacheFail(reqID *uint64, err error) bool {
	code := cacheErrorCode(err)
	ct.broker().metrics.features.cacheErrors.WithLabelValues(string(code)).Inc()
	if wire.Supports(ct.peer, wire.CapCache) {
		ce := &wire.CacheError{RequestID: reqID, Code: code, Message: err.Error()}
		ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, ce) })
	} else {
		m := &wire.ErrorMessage{Message: err.Error(), Err: ct.typed(err)}
		ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, m) })
	}
	if errors.Is(err, ErrForbidden) {
		return false
	}
	return ct.endIfOneShot(reqID)
}

// reply sends m now or, for a one-shot request, sends it and ends the
// stream.
func (ct *control) reply(reqID *uint64, m wire.Message) bool {
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, m) })
	return ct.endIfOneShot(reqID)
}

func (ct *control) endIfOneShot(reqID *uint64) bool {
	if reqID == nil {
		ct.oneShot = true
	}
	return true
}

// change runs a cache change whose outcome arrives through a callback:
// start registers finish and returns an error if the change cannot start.
// Pipelined requests (with request_id) return at once; a one-shot request
// waits for its outcome, since the stream ends with its reply.
func (ct *control) change(op string, reqID *uint64, start func(finish func(wire.Message, error)) error) bool {
	var wait chan struct{}
	if reqID == nil {
		wait = make(chan struct{})
	}
	began := time.Now()
	finish := func(m wire.Message, err error) {
		ct.broker().metrics.features.cacheOp(op, began)
		if err != nil {
			ct.cacheFail(reqID, err)
		} else {
			ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, m) })
		}
		if wait != nil {
			close(wait)
		}
	}
	if err := start(finish); err != nil {
		return ct.cacheFail(reqID, err)
	}
	if wait != nil {
		<-wait
	}
	return ct.endIfOneShot(reqID)
}

func (ct *control) cachePut(m *wire.CachePut) bool {
	c, err := ct.resolveCache(cacheKey(m.TenantID, m.Namespace, m.Cache), auth.ActionCacheWrite)
	if err != nil {
		return ct.cacheFail(m.RequestID, err)
	}
	ttl, err := ttlOf(m.TTLMs)
	if err != nil {
		return ct.cacheFail(m.RequestID, err)
	}
	return ct.change(opPut, m.RequestID, func(finish func(wire.Message, error)) error {
		return c.put(m.Key, m.Value, ttl, func(err error) {
			if m.RequestID == nil {
				finish(&wire.OK{}, err)
				return
			}
			finish(&wire.CacheOK{RequestID: *m.RequestID}, err)
		})
	})
}

// maxTTLms bounds ttl_ms (about 100 years) so an expiry never overflows.
const maxTTLms = 100 * 365 * 24 * 3600 * 1000

// ttlOf is a put's ttl_ms as a duration (nil: no expiry).
func ttlOf(ms *uint64) (time.Duration, error) {
	if ms == nil {
		return 0, nil
	}
	if *ms == 0 || *ms > maxTTLms {
		return 0, cacheErr(wire.CacheErrInvalid, "ttl_ms %d not in [1, %d] (null = no expiry)", *ms, uint64(maxTTLms))
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

func (ct *control) cacheGet(m *wire.CacheGet) bool {
	c, err := ct.resolveCache(cacheKey(m.TenantID, m.Namespace, m.Cache), auth.ActionCacheRead)
	if err != nil {
		return ct.cacheFail(m.RequestID, err)
	}
	v, version, found, err := c.get(m.Key)
	if err != nil {
		return ct.cacheFail(m.RequestID, err)
	}
	reply := &wire.CacheValue{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key,
		Found: found, Value: v, RequestID: m.RequestID}
	if found && ct.features.Has(wire.FeatureCacheConditional) {
		reply.Version = &version
	}
	return ct.reply(m.RequestID, reply)
}

func (ct *control) cacheDelete(m *wire.CacheDelete) bool {
	c, err := ct.resolveCache(cacheKey(m.TenantID, m.Namespace, m.Cache), auth.ActionCacheWrite)
	if err != nil {
		return ct.cacheFail(m.RequestID, err)
	}
	return ct.change(opDelete, m.RequestID, func(finish func(wire.Message, error)) error {
		return c.delete(m.Key, func(existed bool, err error) {
			finish(&wire.CacheDeleted{RequestID: m.RequestID, Existed: existed}, err)
		})
	})
}

func (ct *control) counterAdd(m *wire.CounterAdd) bool {
	c, err := ct.resolveCache(cacheKey(m.TenantID, m.Namespace, m.Cache), auth.ActionCacheWrite)
	if err != nil {
		return ct.cacheFail(m.RequestID, err)
	}
	return ct.change(opCounterAdd, m.RequestID, func(finish func(wire.Message, error)) error {
		return c.counterAdd(m.Key, m.Delta, func(sum int64, err error) {
			finish(&wire.CounterValue{
				TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, Value: sum, RequestID: m.RequestID,
			}, err)
		})
	})
}

func (ct *control) counterGet(m *wire.CounterGet) bool {
	c, err := ct.resolveCache(cacheKey(m.TenantID, m.Namespace, m.Cache), auth.ActionCacheRead)
	if err != nil {
		return ct.cacheFail(m.RequestID, err)
	}
	n, err := c.counterGet(m.Key)
	if err != nil {
		return ct.cacheFail(m.RequestID, err)
	}
	return ct.reply(m.RequestID, &wire.CounterValue{
		TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, Value: n, RequestID: m.RequestID,
	})
}

// watch registers a keyed watch and opens its event stream, exactly as a
// subscribe does: the reply is subscribed{subscription_id}, and the event
// stream starts with event_stream_hello.
func (ct *control) watch(m *wire.Watch) bool {
	k := cacheKey(m.TenantID, m.Namespace, m.Cache)
	c, err := ct.resolveCache(k, auth.ActionCacheRead)
	if err == nil && ct.broker().draining.Load() {
		err = cacheErr(wire.CacheErrUnavailable, "%v", ErrDraining)
	}
	if err != nil {
		return ct.cacheFail(nil, err)
	}
	sub, err := ct.newSubscription(watchQueue(ct.broker().cfg.Queue), func(s *subscription) {
		s.watch = k.String() + " " + m.Key
		s.detach = func(s *subscription) { c.removeWatcher(s, m.Key) }
	})
	if err != nil {
		return ct.cacheFail(nil, err)
	}
	if err := c.addWatcher(sub, m.Key, m.Current != nil && *m.Current); err != nil {
		sub.end()
		return ct.cacheFail(nil, err)
	}
	if !ct.startEventStream(sub) {
		sub.end()
	}
	return true
}
