package main

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/impair"
)

// TestLossyNetworkDeliversEveryAckedRecord is the reliability issue's
// lossy-network scenario: acked publishes to an on_commit durable stream
// and a subscriber resuming by offset, both through the impairment proxy
// (both directions impaired), must deliver every acked record exactly
// once, in order. Throughput and ack latency under each impairment are
// logged for docs/RELIABILITY.md.
func TestLossyNetworkDeliversEveryAckedRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker process through an impaired network")
	}
	bursty := impair.Impairment{}
	bursty.Burst.EnterBad, bursty.Burst.ExitBad, bursty.Burst.LossInBad = 0.005, 0.2, 1
	for _, sc := range []struct {
		name string
		imp  impair.Impairment
	}{
		{"loss 1%", impair.Impairment{Loss: 0.01}},
		{"loss 5%", impair.Impairment{Loss: 0.05}},
		{"bursty loss (GE 0.5%→bad, 20%→good)", bursty},
		{"delay 5ms ±5ms, 5% reordered", impair.Impairment{Delay: 5 * time.Millisecond, Jitter: 5 * time.Millisecond, Reorder: 0.05}},
	} {
		t.Run(sc.name, func(t *testing.T) { lossyRun(t, sc.imp) })
	}
}

func lossyRun(t *testing.T, imp impair.Impairment) {
	kb := newKillableBroker(t)
	kb.start(t)
	proxy, err := impair.New(kb.addr)
	require.NoError(t, err)
	defer proxy.Close()
	proxy.Set(impair.Both, imp)
	via := &killableBroker{addr: proxy.Addr(), pool: kb.pool}

	acked, lat, sub, elapsed := resumeRun(t, via, 2*time.Second)
	st := proxy.Stats()
	p50, p99 := lat.quantiles()
	t.Logf("acked %d (%.0f/s), delivered %d exactly once, ack p50 %v p99 %v; proxy relayed %d, dropped %d, reordered %d; resubscribes %d after %d drop reports",
		acked.len(), float64(acked.len())/elapsed.Seconds(), sub.count(), p50, p99,
		st.Relayed, st.Dropped(), st.Reordered, sub.resubscribes, sub.gaps)
}

// resumeRun publishes (acked, on_commit) through via for d while a resuming
// subscriber follows, then waits until the subscriber has seen every acked
// record and checks it saw each exactly once, in offset order.
func resumeRun(t *testing.T, via *killableBroker, d time.Duration) (*seqSet, *latencies, *resumer, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pubCtx, stopPub := context.WithCancel(ctx)
	subCtx, stopSub := context.WithCancel(ctx)
	acked := &seqSet{m: map[uint64]bool{}}
	lat := &latencies{}
	sub := &resumer{seen: map[uint64]bool{}}
	var wg sync.WaitGroup
	wg.Go(func() { sub.follow(subCtx, via) })
	start := time.Now()
	wg.Go(func() { via.publish(pubCtx, acked, lat) })
	time.Sleep(d) // the load's length: the scenario runs for d
	stopPub()
	elapsed := time.Since(start)
	require.Eventually(t, func() bool { return sub.covers(acked) }, 30*time.Second, 10*time.Millisecond,
		"the subscriber never saw every acked record")
	stopSub()
	wg.Wait()
	require.NoError(t, sub.failure())
	require.Positive(t, acked.len())
	return acked, lat, sub, elapsed
}

// latencies collects ack latencies; nil collects nothing.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) quantiles() (p50, p99 time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100]
}
