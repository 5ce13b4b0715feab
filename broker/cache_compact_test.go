package broker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

// A durable cache's log is compacted when the cache opens and holds far
// more records than live entries: values, counters, TTLs and the LRU order
// survive, revisions continue upward, and a second restart finds nothing
// to compact.
func TestDurableCacheLogCompactedOnOpen(t *testing.T) {
	dir := t.TempDir()
	spec := durableCache("d", "never")
	spec.MaxEntries = 3
	h := startCacheBroker(t, broker.Config{DataDir: dir}, spec)
	ctx := ctxT(t, 60*time.Second)
	k := openCache(t, h, "d")
	for i := range 5000 {
		require.NoError(t, k.Put(ctx, fmt.Sprintf("k%d", i%2), []byte(fmt.Sprint(i)), 0))
	}
	require.NoError(t, k.Put(ctx, "ttl", []byte("t"), time.Hour))
	_, err := k.CounterAdd(ctx, "n", 7)
	require.NoError(t, err)
	before := h.b.Stats().Caches[0]
	require.Equal(t, uint64(5003), before.LogRecords, "5000 puts, ttl, n, and the delete of k0 that n evicted")
	require.NoError(t, h.b.Close())

	h2 := startCacheBroker(t, broker.Config{DataDir: dir})
	after := h2.b.Stats().Caches[0]
	require.Equal(t, 3, after.Entries, "k1, ttl, n")
	require.Equal(t, uint64(3), after.LogRecords, "one record per live entry")
	require.Greater(t, after.Revision, before.Revision, "revisions continue")
	k2 := openCache(t, h2, "d")
	// The LRU order survived: k1 is the least recently used, so a new key
	// evicts it (before any get touches the others).
	require.NoError(t, k2.Put(ctx, "new", nil, 0))
	_, found, err := k2.Get(ctx, "k1")
	require.NoError(t, err)
	require.False(t, found)
	for key, want := range map[string]string{"ttl": "t", "n": "7", "new": ""} {
		v, found, err := k2.Get(ctx, key)
		require.NoError(t, err)
		require.True(t, found, key)
		require.Equal(t, want, string(v), key)
	}
	require.NoError(t, h2.b.Close())

	entries, err := os.ReadDir(filepath.Join(dir, "caches"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no .old or .compact left behind")
	h3 := startCacheBroker(t, broker.Config{DataDir: dir})
	require.Equal(t, uint64(5), h3.b.Stats().Caches[0].LogRecords, "below the threshold: not compacted again")
}
