package broker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

func durableCache(name, fsync string) broker.CacheSpec {
	s := cacheSpec(name)
	s.Durable, s.Fsync = true, fsync
	return s
}

// docs/design.md, "Semantics", durability for caches: every acknowledged put, delete and
// counter change of a durable cache survives a restart (the broker reopens
// the cache from its catalog and rebuilds it from the log), TTLs are
// honoured across it (the record holds the absolute expiry), and logged
// LRU evictions stay evicted.
func TestDurableCacheSurvivesRestart(t *testing.T) {
	for _, fsync := range []string{"on_commit", "periodic", "never"} {
		t.Run(fsync, func(t *testing.T) {
			dir := t.TempDir()
			spec := durableCache("d", fsync)
			spec.MaxEntries = 600
			h := startCacheBroker(t, broker.Config{DataDir: dir}, spec)
			ctx := ctxT(t, 60*time.Second)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for w := range 8 {
				k := openCache(t, h, "d")
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 100 {
						key := fmt.Sprintf("w%d-%d", w, i)
						if err := k.Put(ctx, key, []byte(key), 0); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			k := openCache(t, h, "d")
			require.NoError(t, k.Put(ctx, "short", []byte("x"), 300*time.Millisecond))
			require.NoError(t, k.Put(ctx, "long", []byte("y"), time.Hour))
			_, err := k.CounterAdd(ctx, "n", 41)
			require.NoError(t, err)
			_, err = k.CounterAdd(ctx, "n", 1)
			require.NoError(t, err)
			_, err = k.Delete(ctx, "w0-0")
			require.NoError(t, err)
			// With 600 entries at most, the oldest w keys were evicted (and
			// the evictions logged): 600 = 200 late + short, long, n + 397.
			for i := range 200 {
				require.NoError(t, k.Put(ctx, fmt.Sprintf("late%d", i), nil, 0))
			}
			require.NoError(t, h.b.Close())
			time.Sleep(300 * time.Millisecond) // let "short" expire while the broker is down

			h2 := startCacheBroker(t, broker.Config{DataDir: dir})
			require.Len(t, h2.b.Caches(), 1, "the catalog reopens the durable cache")
			k2 := openCache(t, h2, "d")
			evicted := 0
			for w := range 8 {
				for i := range 100 {
					key := fmt.Sprintf("w%d-%d", w, i)
					v, found, err := k2.Get(ctx, key)
					require.NoError(t, err)
					if !found {
						evicted++
						continue
					}
					require.Equal(t, key, string(v))
				}
			}
			require.Equal(t, 800-397, evicted, "the deleted key and the logged evictions")
			for i := range 200 {
				_, found, err := k2.Get(ctx, fmt.Sprintf("late%d", i))
				require.NoError(t, err)
				require.True(t, found)
			}
			_, found, err := k2.Get(ctx, "short")
			require.NoError(t, err)
			require.False(t, found, "expired during the restart")
			_, found, err = k2.Get(ctx, "long")
			require.NoError(t, err)
			require.True(t, found)
			n, err := k2.CounterGet(ctx, "n")
			require.NoError(t, err)
			require.Equal(t, int64(42), n)
		})
	}
}
