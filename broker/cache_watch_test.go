package broker_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/wire"
)

// docs/design.md, "Semantics", watch: 50 concurrent watchers of one key (on 5 connections)
// each see every put in order, or an exact gap count: received + reported
// dropped = puts, with values and revisions strictly increasing.
func TestWatch50WatchersSeeEveryPutInOrder(t *testing.T) {
	h := startCacheBroker(t, broker.Config{}, cacheSpec("c"))
	ctx := ctxT(t, 60*time.Second)
	var watches []*client.Watch
	for range 5 {
		c := h.dial(t)
		for range 10 {
			w, err := c.Watch(ctx, "default", "c", "k", client.WatchOptions{})
			require.NoError(t, err)
			watches = append(watches, w)
		}
	}
	const puts = 1000
	k := openCache(t, h, "c")
	go func() {
		for i := range puts {
			if err := k.Put(ctx, "k", []byte(strconv.Itoa(i)), 0); err != nil {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, len(watches))
	for _, w := range watches {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- expectWatchSequence(ctx, w, puts) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// expectWatchSequence reads until puts changes are accounted for.
func expectWatchSequence(ctx context.Context, w *client.Watch, puts int) error {
	last, lastRev, seen := -1, uint64(0), 0
	var dropped uint64
	for seen+int(dropped) < puts {
		ev, err := w.Next(ctx)
		if err != nil {
			return fmt.Errorf("after %d events, %d dropped: %w", seen, dropped, err)
		}
		if ev.Dropped > 0 {
			dropped += ev.Dropped
			continue
		}
		v, err := strconv.Atoi(string(ev.Value))
		if err != nil || ev.Op != wire.CacheOpPut || ev.Key != "k" {
			return fmt.Errorf("unexpected event %+v", ev)
		}
		if v <= last || (seen > 0 && ev.Revision <= lastRev) {
			return fmt.Errorf("out of order: %d (rev %d) after %d (rev %d)", v, ev.Revision, last, lastRev)
		}
		if dropped == 0 && v != last+1 {
			return fmt.Errorf("gap without a report: %d after %d", v, last)
		}
		last, lastRev = v, ev.Revision
		seen++
	}
	if seen+int(dropped) != puts || last != puts-1 && dropped == 0 {
		return fmt.Errorf("seen %d + dropped %d != %d", seen, dropped, puts)
	}
	return nil
}

// docs/design.md, "Semantics", watch with the current value first: under concurrent puts,
// the snapshot is followed by exactly the later changes, no gap and no
// duplicate, in a durable on_commit cache as in an ephemeral one.
func TestWatchCurrentThenChangesNoGapNoDuplicate(t *testing.T) {
	durable := cacheSpec("d")
	durable.Durable, durable.Fsync = true, "on_commit"
	cfg := broker.Config{DataDir: t.TempDir(), Queue: fanout.Config{Capacity: 1 << 16}}
	h := startCacheBroker(t, cfg, cacheSpec("c"), durable)
	for _, name := range []string{"c", "d"} {
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t, 60*time.Second)
			const puts = 600
			k := openCache(t, h, name)
			require.NoError(t, k.Put(ctx, "k", []byte("0"), 0))
			started := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				for i := 1; i < puts; i++ {
					if i == 50 {
						close(started)
					}
					if err := k.Put(ctx, "k", []byte(strconv.Itoa(i)), 0); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			<-started
			var watches []*client.Watch
			for range 8 { // several snapshots at different points of the run
				w, err := h.dial(t).Watch(ctx, "default", name, "k", client.WatchOptions{Current: true})
				require.NoError(t, err)
				watches = append(watches, w)
			}
			for _, w := range watches {
				first, err := w.Next(ctx)
				require.NoError(t, err)
				require.Equal(t, wire.CacheOpPut, first.Op)
				v, err := strconv.Atoi(string(first.Value))
				require.NoError(t, err)
				for want := v + 1; want < puts; want++ {
					ev, err := w.Next(ctx)
					require.NoError(t, err)
					require.Zero(t, ev.Dropped)
					require.Equal(t, strconv.Itoa(want), string(ev.Value), "after a snapshot of %d", v)
					require.Greater(t, ev.Revision, first.Revision)
				}
			}
			require.NoError(t, <-done)
		})
	}
}

// A watch sees deletes and LRU evictions as deletes, counters as counters;
// the current state of an absent key is a delete; deleting an absent key
// is no change: the writer hears "absent" and watchers hear nothing.
func TestWatchDeletesEvictionsAndCounters(t *testing.T) {
	spec := cacheSpec("small")
	spec.MaxEntries = 2
	h := startCacheBroker(t, broker.Config{}, spec)
	ctx := ctxT(t, 20*time.Second)
	w, err := h.dial(t).Watch(ctx, "default", "small", "a", client.WatchOptions{Current: true})
	require.NoError(t, err)
	ev, err := w.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, wire.CacheOpDelete, ev.Op, "absent key: a delete")
	require.True(t, ev.Current)

	k := openCache(t, h, "small")
	require.NoError(t, k.Put(ctx, "a", []byte("1"), time.Hour))
	_, err = k.CounterAdd(ctx, "a", 2)
	require.NoError(t, err)
	require.NoError(t, k.Put(ctx, "b", nil, 0))
	require.NoError(t, k.Put(ctx, "c", nil, 0)) // evicts a
	existed, err := k.Delete(ctx, "a")
	require.NoError(t, err)
	require.False(t, existed)
	require.NoError(t, k.Put(ctx, "a", []byte("4"), time.Hour))
	want := []struct {
		op  wire.CacheOp
		val string
	}{{wire.CacheOpPut, "1"}, {wire.CacheOpCounter, "3"}, {wire.CacheOpDelete, ""}, {wire.CacheOpPut, "4"}}
	for i, wnt := range want {
		ev, err := w.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, wnt.op, ev.Op, i)
		require.False(t, ev.Current, i)
		require.Equal(t, wnt.val, string(ev.Value), i)
		if wnt.op != wire.CacheOpDelete {
			require.WithinDuration(t, time.Now().Add(time.Hour), ev.ExpiresAt, time.Minute, "a counter keeps the expiry")
		}
	}
	require.NoError(t, w.Close())
}
