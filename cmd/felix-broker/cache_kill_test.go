package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
)

// docs/design.md, "Semantics", durability for caches: an on_commit put's ack means it
// survives kill -9. Eight writers put until the broker process is killed
// with SIGKILL mid-stream; a broker restarted on the same data directory
// (the cache reopened from the catalog, rebuilt from its log) has every
// acknowledged put.
func TestDurableCacheKill9KeepsEveryAckedPut(t *testing.T) {
	data := t.TempDir()
	env := []string{"FELIX_DATA_DIR=" + data, "FELIX_CACHES=t1/default/d:on_commit"}
	bp := startBrokerProcess(t, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := bp.dial(t)
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	enough := make(chan struct{})
	var once sync.Once
	for w := range 8 {
		k, err := c.OpenCache(ctx, "default", "d")
		require.NoError(t, err)
		wg.Go(func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("w%d-%d", w, i)
				if k.Put(ctx, key, []byte(key), 0) != nil {
					return // the broker is gone
				}
				mu.Lock()
				acked = append(acked, key)
				if len(acked) == 400 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatal("too few acks before the deadline")
	}
	require.NoError(t, bp.cmd.Process.Signal(syscall.SIGKILL))
	<-bp.exited
	c.Close() // fails the writers' in-flight puts at once
	wg.Wait()

	bp2 := startBrokerProcess(t, env...)
	k, err := bp2.dial(t).OpenCache(ctx, "default", "d")
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	for _, key := range acked {
		v, found, err := k.Get(ctx, key)
		require.NoError(t, err)
		require.True(t, found, "acked put %s lost (%d acked)", key, len(acked))
		require.Equal(t, key, string(v))
	}
	t.Logf("%d acknowledged puts survived kill -9", len(acked))
}

// docs/design.md, "Semantics", cache, with a real broker process: two
// writers on two connections do read-modify-write on one key with
// cache_put_if for FELIX_CAS_SECONDS (1 s by default, 10 in make
// reliability); the final value is the number of writes that applied, so
// no update was lost.
func TestCacheConditionalNoLostUpdate(t *testing.T) {
	d := time.Duration(envCount(t, "FELIX_CAS_SECONDS", 1)) * time.Second
	bp := startBrokerProcess(t, "FELIX_DATA_DIR="+t.TempDir(), "FELIX_CACHES=t1/default/d:on_commit")
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	var (
		mu               sync.Mutex
		applied, refused int
		wg               sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for range 2 {
		k, err := bp.dial(t).OpenCache(ctx, "default", "d")
		require.NoError(t, err)
		wg.Go(func() {
			for time.Now().Before(deadline) {
				val, ver, found, err := k.GetVersion(ctx, "n")
				require.NoError(t, err)
				next, cond := 1, client.IfAbsent
				if found {
					cur, err := strconv.Atoi(string(val))
					require.NoError(t, err)
					next, cond = cur+1, client.IfVersion(ver)
				}
				ok, _, _, err := k.PutIf(ctx, "n", []byte(strconv.Itoa(next)), 0, cond)
				require.NoError(t, err)
				mu.Lock()
				if ok {
					applied++
				} else {
					refused++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	k, err := bp.dial(t).OpenCache(ctx, "default", "d")
	require.NoError(t, err)
	val, _, _, err := k.GetVersion(ctx, "n")
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(applied), string(val))
	require.Positive(t, refused, "the writers raced")
	t.Logf("%s: %d read-modify-writes applied, %d refused as stale, none lost", d, applied, refused)
}
