package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
