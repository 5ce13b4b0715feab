package broker_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/fanout"
)

// docs/design.md, "Semantics": "a slow subscriber never slows the
// publisher or its neighbours": 10 subscribers with queue 64 under drop_new,
// 2 of them sleeping 5 ms per event. The 8 fast ones receive everything; for
// each slow one delivered + reported-dropped equals published exactly. The
// ack p50 with and without slow subscribers is logged; the benchmark asserts
// the ratio.
func TestSlowSubscribersAreIsolatedAndAccountedExactly(t *testing.T) {
	if testing.Short() {
		// Timing-based (a 5 ms consumer must fall behind a paced publisher);
		// under the race detector the publisher itself is slower than that.
		t.Skip("timing-sensitive; runs in the unit pass, not under -short/-race")
	}
	const published = 3000
	for _, slow := range []int{0, 2} {
		p50 := runIsolation(t, published, slow)
		t.Logf("slow subscribers %d: publisher ack p50 %v", slow, p50)
	}
}

func runIsolation(t *testing.T, published, slow int) time.Duration {
	h := startBroker(t, broker.Config{
		Queue: fanout.Config{Capacity: 64, Policy: fanout.DropNew},
	})
	ctx := ctxT(t, 60*time.Second)
	type result struct{ delivered, dropped uint64 }
	results := make([]result, 10)
	var wg sync.WaitGroup
	for i := range 10 {
		// Small receive windows keep the backlog of a slow subscriber in the
		// broker's bounded queue, where the policy applies, rather than in
		// 16 MiB of transport buffers.
		c := h.dialWith(t, client.Config{StreamReceiveWindow: 64 << 10, ConnectionReceiveWindow: 128 << 10, SubscriptionBuffer: 8})
		sub, err := c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
		require.NoError(t, err)
		delay := time.Duration(0)
		if i < slow {
			delay = 5 * time.Millisecond
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i].delivered, results[i].dropped = drainUntil(ctx, t, sub, published, delay)
		}()
	}
	pub, err := h.dial(t).NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	lat := make([]time.Duration, 0, published)
	// Paced like the published isolation runs: the point is a healthy fleet
	// with two slow members, not a broker saturated by 10× fanout on 2 cores.
	tick := time.NewTicker(500 * time.Microsecond)
	defer tick.Stop()
	for i := range published {
		<-tick.C
		start := time.Now()
		require.NoError(t, pub.Publish(ctx, seq(uint64(i), 256)))
		lat = append(lat, time.Since(start))
	}
	wg.Wait()
	t.Logf("results (delivered, dropped): %v", results)
	for i, r := range results {
		if i >= slow {
			require.Equal(t, uint64(published), r.delivered, "fast subscriber %d must receive everything", i)
			require.Zero(t, r.dropped)
			continue
		}
		require.Equal(t, uint64(published), r.delivered+r.dropped,
			"slow subscriber %d: delivered %d + dropped %d", i, r.delivered, r.dropped)
		require.NotZero(t, r.dropped, "a 5 ms/event subscriber cannot keep up; drops must be reported")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2]
}

// drainUntil reads events (sleeping delay after each, like a slow consumer)
// until delivered + reported-dropped reaches want. Offsets must increase.
func drainUntil(ctx context.Context, t *testing.T, sub *client.Subscription, want int, delay time.Duration) (delivered, dropped uint64) {
	next := uint64(0)
	for delivered+dropped < uint64(want) {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Errorf("subscription %d: %v after %d delivered, %d dropped", sub.ID(), err, delivered, dropped)
			return
		}
		if ev.Dropped > 0 {
			dropped += ev.Dropped
			continue
		}
		if ev.Offset < next {
			t.Errorf("subscription %d: offset %d after %d", sub.ID(), ev.Offset, next)
		}
		next = ev.Offset + 1
		delivered++
		if delay > 0 {
			time.Sleep(delay)
		}
	}
	return
}
