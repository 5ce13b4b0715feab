package broker_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

// docs/design.md, "Semantics", cache: a conditional write applies only when
// the key's live entry is absent or has the version named; the answer
// carries the version written or the key's current one; gets return the
// version; delete_if removes only the version named. On a durable cache a
// version read before a restart still names the value after it.
func TestCacheConditionalWrites(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "durable"}[durable], func(t *testing.T) {
			dir, spec := t.TempDir(), cacheSpec("c")
			if durable {
				spec = durableCache("c", "on_commit")
			}
			h := startCacheBroker(t, broker.Config{DataDir: dir}, spec)
			ctx := ctxT(t, 10*time.Second)
			k := openCache(t, h, "c")

			applied, v1, found, err := k.PutIf(ctx, "lease", []byte("a"), 0, client.IfAbsent)
			require.NoError(t, err)
			require.True(t, applied)
			require.True(t, found)
			applied, cur, found, err := k.PutIf(ctx, "lease", []byte("b"), 0, client.IfAbsent)
			require.NoError(t, err)
			require.False(t, applied, "create-only on a present key")
			require.Equal(t, v1, cur)
			require.True(t, found)

			val, ver, found, err := k.GetVersion(ctx, "lease")
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, "a", string(val))
			require.Equal(t, v1, ver)

			applied, v2, _, err := k.PutIf(ctx, "lease", []byte("c"), time.Hour, client.IfVersion(v1))
			require.NoError(t, err)
			require.True(t, applied)
			require.Greater(t, v2, v1, "versions only grow")
			applied, cur, _, err = k.PutIf(ctx, "lease", []byte("d"), 0, client.IfVersion(v1))
			require.NoError(t, err)
			require.False(t, applied, "a stale version")
			require.Equal(t, v2, cur)

			applied, cur, _, err = k.DeleteIf(ctx, "lease", v1)
			require.NoError(t, err)
			require.False(t, applied)
			require.Equal(t, v2, cur)
			if durable {
				require.NoError(t, h.b.Close())
				h = startCacheBroker(t, broker.Config{DataDir: dir})
				k = openCache(t, h, "c")
			}
			applied, _, found, err = k.DeleteIf(ctx, "lease", v2)
			require.NoError(t, err)
			require.True(t, applied)
			require.False(t, found, "no live entry after an applied delete_if")
			_, _, found, err = k.GetVersion(ctx, "lease")
			require.NoError(t, err)
			require.False(t, found)
			applied, _, found, err = k.PutIf(ctx, "lease", []byte("e"), 0, client.IfVersion(v2))
			require.NoError(t, err)
			require.False(t, applied, "a version of a deleted key matches nothing")
			require.False(t, found)
		})
	}
}

// docs/design.md, "Semantics", cache: two writers doing read-modify-write
// with put_if on one key lose no update: the final value is the number of
// writes that applied.
func TestCacheConditionalReadModifyWriteLosesNothing(t *testing.T) {
	h := startCacheBroker(t, broker.Config{DataDir: t.TempDir()}, durableCache("c", "periodic"))
	ctx := ctxT(t, 30*time.Second)
	applied := casCounter(t, ctx, []*client.Cache{openCache(t, h, "c"), openCache(t, h, "c")}, 400*time.Millisecond)
	v, _, _, err := openCache(t, h, "c").GetVersion(ctx, "n")
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(applied), string(v))
}

// casCounter runs one read-modify-write loop per cache handle on key "n"
// for d and returns how many writes applied.
func casCounter(t *testing.T, ctx context.Context, caches []*client.Cache, d time.Duration) int {
	var mu sync.Mutex
	total, refused := 0, 0
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for _, k := range caches {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				val, ver, found, err := k.GetVersion(ctx, "n")
				require.NoError(t, err)
				n := 0
				cond := client.IfAbsent
				if found {
					n, err = strconv.Atoi(string(val))
					require.NoError(t, err)
					cond = client.IfVersion(ver)
				}
				ok, _, _, err := k.PutIf(ctx, "n", []byte(strconv.Itoa(n+1)), 0, cond)
				require.NoError(t, err)
				mu.Lock()
				if ok {
					total++
				} else {
					refused++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d writes applied, %d refused as stale", total, refused)
	require.Positive(t, total)
	return total
}
