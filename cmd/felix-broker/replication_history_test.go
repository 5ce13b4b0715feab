package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/segment"
)

// repHistory is what the replication fault test's clients were told: each
// publisher's batches and the offsets their acks named, and the events the
// subscriber saw in order. check compares it with a replica's log.
type repHistory struct {
	pubs  []*client.IdempotentPublisher
	stop  context.CancelFunc
	wg    sync.WaitGroup
	subWG sync.WaitGroup

	subStop context.CancelFunc
	subCtx  context.Context
	// pace, if set, is the time between two batches of a publisher.
	pace time.Duration

	mu       sync.Mutex
	acks     map[[2]uint64]uint64 // (publisher, batch) → the offset its ack named
	sent     map[uint64]uint64    // publisher → batches sent
	ackTimes []time.Time
	ackConns []repConn // beside ackTimes: whose ack, on which of its connections
	errs     []error
	seen     []repEvent // what the subscriber received, in order
	next     uint64     // the subscriber's next offset
	resumed  int
}

// repConn is a publisher and the connections it had made
// (IdempotentPublisher.Reconnects) when one of its batches was acked.
type repConn struct {
	pub   int
	conns uint64
}

type repEvent struct {
	offset  uint64
	payload string
}

func newRepHistory() *repHistory {
	h := &repHistory{acks: map[[2]uint64]uint64{}, sent: map[uint64]uint64{}}
	h.subCtx, h.subStop = context.WithCancel(context.Background())
	return h
}

// repPayload is record i (0 or 1) of batch n of publisher p, 64 bytes.
func repPayload(p, n uint64, i int) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint64(b[0:], p)
	binary.BigEndian.PutUint64(b[8:], n)
	b[16] = byte(i)
	return b
}

// publish sends two-record batches until ctx ends; each answer is waited
// for however many faults it takes.
func (h *repHistory) publish(ctx context.Context, p uint64, pub *client.IdempotentPublisher) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var tick <-chan time.Time
	if h.pace > 0 {
		t := time.NewTicker(h.pace)
		defer t.Stop()
		tick = t.C
	}
	for n := uint64(0); ctx.Err() == nil; n++ {
		if tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
				return
			}
		}
		pa := pub.PublishAsync(ctx, nil, [][]byte{repPayload(p, n, 0), repPayload(p, n, 1)})
		h.mu.Lock()
		h.sent[p] = n + 1
		h.mu.Unlock()
		wg.Go(func() {
			err := pa.Wait(context.Background())
			h.mu.Lock()
			defer h.mu.Unlock()
			switch {
			case errors.Is(err, context.Canceled) && ctx.Err() != nil:
				// Never sent: the run stopped while it waited for room.
			case err != nil:
				h.errs = append(h.errs, fmt.Errorf("publisher %d batch %d: %w", p, n, err))
			default:
				h.acks[[2]uint64{p, n}] = pa.Result().Offset
				h.ackTimes = append(h.ackTimes, time.Now())
				h.ackConns = append(h.ackConns, repConn{int(p), pub.Reconnects()})
			}
		})
	}
}

func (h *repHistory) ackCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ackTimes)
}

// conns is each publisher's count of connections made (Reconnects).
func (h *repHistory) conns() []uint64 {
	var n []uint64
	for _, pub := range h.pubs {
		n = append(n, pub.Reconnects())
	}
	return n
}

// nextAckAfter waits for the first ack after at (the failover time of a
// leader killed at at) that came on a connection its publisher made after
// at, when it had made conns: an ack the leader sent just before it died
// (taken in within a millisecond of the kill) is no failover. A publisher
// on the replica that wins the election, retrying its shard_unavailable
// answers there, gets a failover ack on an old connection: the next
// such ack of another publisher is counted instead.
func (h *repHistory) nextAckAfter(ctx context.Context, at time.Time, from int, conns []uint64) time.Duration {
	for ctx.Err() == nil {
		h.mu.Lock()
		for i, t := range h.ackTimes[from:] {
			if c := h.ackConns[from+i]; t.After(at) && c.conns > conns[c.pub] {
				h.mu.Unlock()
				return t.Sub(at)
			}
		}
		h.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

// maxGap is the longest time between two consecutive acks (of any
// publisher) from the last ack before from to the last one before to,
// and the time of the ack that began it.
func (h *repHistory) maxGap(from, to time.Time) (time.Duration, time.Time) {
	h.mu.Lock()
	ts := slices.Clone(h.ackTimes)
	h.mu.Unlock()
	slices.SortFunc(ts, time.Time.Compare)
	first, _ := slices.BinarySearchFunc(ts, from, time.Time.Compare)
	var gap time.Duration
	var at time.Time
	for k := max(first, 1); k < len(ts) && !ts[k].After(to); k++ {
		if d := ts[k].Sub(ts[k-1]); d > gap {
			gap, at = d, ts[k-1]
		}
	}
	return gap, at
}

// awaitProgress fails unless publishing goes on after a fault: ten more
// batches acked within d.
func (h *repHistory) awaitProgress(t *testing.T, ctx context.Context, d time.Duration, after string) {
	t.Helper()
	start := h.ackCount()
	deadline := time.Now().Add(d)
	for h.ackCount() < start+10 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			h.mu.Lock()
			errs := h.errs[:min(len(h.errs), 3)]
			h.mu.Unlock()
			t.Fatalf("publishing did not resume within %v after %s (first errors: %v)", d, after, errs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// follow subscribes where the stream's leader is (following not_owner from
// whichever broker it asks), resuming by offset after every failure or
// silence of 3 s, until subStop.
func (h *repHistory) follow(rc *replicatedCluster) {
	ctx := h.subCtx
	addr := rc.brokers[0].addr
	for turn := 0; ctx.Err() == nil; turn++ {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := client.Dial(dctx, addr, rc.ccfg)
		cancel()
		if err != nil {
			addr = rc.brokers[turn%len(rc.brokers)].addr
			continue
		}
		h.mu.Lock()
		from := h.next
		h.mu.Unlock()
		sub, err := c.Subscribe(ctx, "default", "rep", client.SubscribeOptions{From: client.Offset(from)})
		var be *client.BrokerError
		switch {
		case errors.As(err, &be) && be.Owner != nil && be.Owner.Addr != "":
			addr = be.Owner.Addr
		case err != nil:
			addr = rc.brokers[turn%len(rc.brokers)].addr
			time.Sleep(50 * time.Millisecond)
		default:
			h.read(ctx, sub)
			h.mu.Lock()
			h.resumed++
			h.mu.Unlock()
		}
		c.Close()
	}
}

// read records events until the subscription fails or stays silent 3 s.
func (h *repHistory) read(ctx context.Context, sub *client.Subscription) {
	for {
		nctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ev, err := sub.Next(nctx)
		cancel()
		if err != nil {
			return
		}
		h.mu.Lock()
		if ev.Dropped > 0 {
			h.errs = append(h.errs, fmt.Errorf("subscriber: %d events dropped before offset %d", ev.Dropped, h.next))
		} else {
			h.seen = append(h.seen, repEvent{ev.Offset, string(ev.Payload)})
			h.next = ev.Offset + 1
		}
		h.mu.Unlock()
	}
}

func (h *repHistory) resumes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resumed
}

// awaitSubscriber waits for the subscriber to reach the replicas' commit,
// then stops it.
func (h *repHistory) awaitSubscriber(ctx context.Context, rc *replicatedCluster) {
	commit := rc.replica(0).Commit // offset + 1 of the last record
	require.Eventually(rc.t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.next >= commit || ctx.Err() != nil
	}, 30*time.Second, 20*time.Millisecond, "the subscriber reaches offset %d", commit)
	h.subStop()
	h.subWG.Wait()
}

// check is the history checker. Against the events of cb's replica log (a
// generation record takes an offset but is no event):
//   - every acked batch is there, at the offset its ack named, its two
//     records adjacent, once;
//   - nothing is there that no client published, nor anything twice, and
//     each publisher's batches are in the order it sent them;
//   - the subscriber saw a run of the log's events, in the log's order,
//     with none missing and none twice.
func (h *repHistory) check(t *testing.T, cb *clusterBroker) {
	dir := filepath.Join(cb.dir, "data", segment.ShardDirName("t1", "default", "rep", 0))
	events := replicaEvents(t, dir)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(t, h.errs)
	at := map[[3]uint64]uint64{} // (publisher, batch, record) → offset
	next := map[uint64]uint64{}
	// A probe sent to a partitioned leader was refused, with an outcome
	// unknown (quorum_timeout, leadership_lost): if that leader is elected
	// again after the heal, it commits what it held. Such records are
	// the probes', never acked; they take no place in the check.
	var probes []repEvent
	events = slices.DeleteFunc(events, func(ev repEvent) bool {
		if ev.payload == probePayload {
			probes = append(probes, ev)
			return true
		}
		return false
	})
	for k, ev := range events {
		require.Len(t, ev.payload, 64, "offset %d: a record no client published", ev.offset)
		b := []byte(ev.payload)
		p, n, i := binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:]), uint64(b[16])
		require.Less(t, n, h.sent[p], "offset %d: batch %d of publisher %d was never sent", ev.offset, n, p)
		key := [3]uint64{p, n, i}
		if prev, dup := at[key]; dup {
			t.Fatalf("offset %d: record %d of batch %d of publisher %d duplicated (first at %d)", ev.offset, i, n, p, prev)
		}
		at[key] = ev.offset
		if i == 1 {
			require.Equal(t, events[k-1].offset+1, ev.offset, "offset %d: the records of a batch are adjacent", ev.offset)
			continue
		}
		require.Equal(t, next[p], n, "offset %d: publisher %d's batches once each, in order", ev.offset, p)
		next[p]++
	}
	for k, off := range h.acks {
		got, ok := at[[3]uint64{k[0], k[1], 0}]
		require.True(t, ok, "batch %d of publisher %d was acked at offset %d and is not in the log", k[1], k[0], off)
		require.Equal(t, off, got, "batch %d of publisher %d: its ack named offset %d", k[1], k[0], off)
	}
	require.Len(t, events, 2*len(h.acks), "the log holds exactly the acked batches")
	if len(probes) > 0 {
		t.Logf("%d probe records (refused, outcome unknown) were committed after their partition healed", len(probes))
	}
	h.seen = slices.DeleteFunc(h.seen, func(ev repEvent) bool { return ev.payload == probePayload })
	// The subscriber's events are a run of the log's.
	require.NotEmpty(t, h.seen)
	start := 0
	for start < len(events) && events[start].offset < h.seen[0].offset {
		start++
	}
	require.LessOrEqual(t, start+len(h.seen), len(events))
	for k, ev := range h.seen {
		require.Equal(t, events[start+k], ev, "the subscriber's event %d", k)
	}
}

// replicaEvents reads the events of the replica log in dir (its broker
// stopped).
func replicaEvents(t *testing.T, dir string) []repEvent {
	l, err := segment.Open(dir, segment.Config{FormatVersion: segment.FormatVersionV4, KeepPartialBatches: true})
	require.NoError(t, err)
	defer l.Close()
	r, err := l.NewReader(l.First())
	require.NoError(t, err)
	defer r.Close()
	var out []repEvent
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if rec.Mark.IsEvent() {
			out = append(out, repEvent{rec.Offset, string(rec.Payload)})
		}
	}
}
