package broker_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/wire"
)

func cacheSpec(name string) broker.CacheSpec {
	return broker.CacheSpec{CacheKey: broker.CacheKey{Tenant: "t1", Namespace: "default", Cache: name}}
}

// startCacheBroker serves a broker with the demo stream and the caches.
func startCacheBroker(t testing.TB, cfg broker.Config, caches ...broker.CacheSpec) *harness {
	t.Helper()
	h := startBroker(t, cfg)
	for _, c := range caches {
		require.NoError(t, h.b.CreateCache(c))
	}
	return h
}

func openCache(t testing.TB, h *harness, name string) *client.Cache {
	t.Helper()
	k, err := h.dial(t).OpenCache(ctxT(t, 10*time.Second), "default", name)
	require.NoError(t, err)
	return k
}

// docs/design.md, "Semantics", cache: put / get / delete per key; delete then get misses.
func TestCachePutGetDelete(t *testing.T) {
	h := startCacheBroker(t, broker.Config{}, cacheSpec("c"))
	ctx := ctxT(t, 10*time.Second)
	k := openCache(t, h, "c")
	_, found, err := k.Get(ctx, "k")
	require.NoError(t, err)
	require.False(t, found)
	require.NoError(t, k.Put(ctx, "k", []byte("v1"), 0))
	require.NoError(t, k.Put(ctx, "empty", nil, 0))
	v, found, err := k.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v1", string(v))
	v, found, err = k.Get(ctx, "empty")
	require.NoError(t, err)
	require.True(t, found, "an empty value is a hit")
	require.Empty(t, v)

	existed, err := k.Delete(ctx, "k")
	require.NoError(t, err)
	require.True(t, existed)
	_, found, err = k.Get(ctx, "k")
	require.NoError(t, err)
	require.False(t, found, "delete then get misses")
	existed, err = k.Delete(ctx, "k")
	require.NoError(t, err)
	require.False(t, existed)
}

// docs/design.md, "Semantics", cache TTL: a value is served until its TTL runs out, then
// never again.
func TestCacheTTLExpiry(t *testing.T) {
	h := startCacheBroker(t, broker.Config{}, cacheSpec("c"))
	ctx := ctxT(t, 10*time.Second)
	k := openCache(t, h, "c")
	start := time.Now()
	require.NoError(t, k.Put(ctx, "short", []byte("x"), 150*time.Millisecond))
	require.NoError(t, k.Put(ctx, "long", []byte("y"), time.Hour))
	_, found, err := k.Get(ctx, "short")
	require.NoError(t, err)
	require.True(t, found || time.Since(start) >= 150*time.Millisecond)
	require.Eventually(t, func() bool {
		_, found, err := k.Get(ctx, "short")
		return err == nil && !found
	}, 5*time.Second, 10*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "expired no earlier than its TTL")
	_, found, err = k.Get(ctx, "long")
	require.NoError(t, err)
	require.True(t, found)
}

// docs/design.md, "Semantics", counter: add returns the new sum in one round trip; get
// reads it; absent reads 0; a non-counter value and overflow are refused.
func TestCounters(t *testing.T) {
	h := startCacheBroker(t, broker.Config{}, cacheSpec("c"))
	ctx := ctxT(t, 10*time.Second)
	k := openCache(t, h, "c")
	n, err := k.CounterGet(ctx, "hits")
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = k.CounterAdd(ctx, "hits", 5)
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	n, err = k.CounterAdd(ctx, "hits", -7)
	require.NoError(t, err)
	require.Equal(t, int64(-2), n)
	v, _, err := k.Get(ctx, "hits")
	require.NoError(t, err)
	require.Equal(t, "-2", string(v), "a counter reads as its decimal text")

	require.NoError(t, k.Put(ctx, "text", []byte("hello"), 0))
	_, err = k.CounterAdd(ctx, "text", 1)
	requireCacheError(t, err, wire.CacheErrNotCounter)
	require.NoError(t, k.Put(ctx, "big", []byte("9223372036854775807"), 0))
	_, err = k.CounterAdd(ctx, "big", 1)
	requireCacheError(t, err, wire.CacheErrOverflow)
	n, err = k.CounterGet(ctx, "big")
	require.NoError(t, err)
	require.Equal(t, int64(9223372036854775807), n, "a refused add changes nothing")
}

// Concurrent adds from many connections lose no increment.
func TestCounterConcurrentAdds(t *testing.T) {
	h := startCacheBroker(t, broker.Config{}, cacheSpec("c"))
	ctx := ctxT(t, 20*time.Second)
	errs := make(chan error, 4)
	for range 4 {
		k := openCache(t, h, "c")
		go func() {
			for range 100 {
				if _, err := k.CounterAdd(ctx, "n", 1); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	n, err := openCache(t, h, "c").CounterGet(ctx, "n")
	require.NoError(t, err)
	require.Equal(t, int64(400), n)
}

func requireCacheError(t *testing.T, err error, code wire.CacheErrorCode) {
	t.Helper()
	var ce *client.CacheError
	require.True(t, errors.As(err, &ce), "want a cache error %s, got %v", code, err)
	require.Equal(t, code, ce.Code, ce.Message)
}

// Cache capacity (docs/protocol.md): past max_entries the least recently
// used entry is evicted, and a get counts as a use.
func TestCacheLRUEviction(t *testing.T) {
	spec := cacheSpec("small")
	spec.MaxEntries, spec.MaxBytes = 3, 1<<20
	h := startCacheBroker(t, broker.Config{}, spec)
	ctx := ctxT(t, 10*time.Second)
	k := openCache(t, h, "small")
	for _, key := range []string{"a", "b", "c"} {
		require.NoError(t, k.Put(ctx, key, []byte(key), 0))
	}
	_, _, err := k.Get(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, k.Put(ctx, "d", []byte("d"), 0))
	for key, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		_, found, err := k.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, want, found, key)
	}

	bytesSpec := cacheSpec("bytes")
	bytesSpec.MaxBytes = 10
	require.NoError(t, h.b.CreateCache(bytesSpec))
	kb := openCache(t, h, "bytes")
	require.NoError(t, kb.Put(ctx, "k1", []byte("1234"), 0)) // 6 bytes
	require.NoError(t, kb.Put(ctx, "k2", []byte("1234"), 0)) // 12 > 10: k1 goes
	_, found, err := kb.Get(ctx, "k1")
	require.NoError(t, err)
	require.False(t, found)
	err = kb.Put(ctx, "k3", []byte("12345678901"), 0)
	requireCacheError(t, err, wire.CacheErrValueTooLarge)
}

// Requests on one stream are pipelined: many in flight at once, replies
// matched by request id.
func TestCachePipelinedOnOneStream(t *testing.T) {
	h := startCacheBroker(t, broker.Config{}, cacheSpec("c"))
	ctx := ctxT(t, 20*time.Second)
	k := openCache(t, h, "c")
	errs := make(chan error, 64)
	for i := range 64 {
		go func() {
			key := fmt.Sprintf("k%d", i)
			if err := k.Put(ctx, key, []byte(key), 0); err != nil {
				errs <- err
				return
			}
			v, found, err := k.Get(ctx, key)
			if err == nil && (!found || string(v) != key) {
				err = fmt.Errorf("%s: got %q %v", key, v, found)
			}
			errs <- err
		}()
	}
	for range 64 {
		require.NoError(t, <-errs)
	}
}
