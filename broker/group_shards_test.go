package broker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

// Queues over multi-shard streams (docs/protocol.md "Queues"): a group is
// one group per shard; a member takes from every shard.

func shardedSpec(name, fsync string, shards int) broker.StreamSpec {
	s := durableSpec(name, fsync)
	s.Shards = shards
	return s
}

// shardSeq is the payload of record off of shard: the test can tell from a
// delivery that it carries the shard and offset of its record.
func shardSeq(shard uint32, off uint64) []byte { return seq(uint64(shard)<<32|off, 32) }

// publishShards publishes perShard records to each of shards shards,
// addressed explicitly, and waits for their acks.
func publishShards(t *testing.T, ctx context.Context, h *harness, stream string, shards, perShard int) {
	t.Helper()
	pub, err := h.dial(t).NewPublisher(ctx, "default", stream)
	require.NoError(t, err)
	for sh := range uint32(shards) {
		for i := 0; i < perShard; i += 32 {
			batch := make([][]byte, 0, 32)
			for j := i; j < min(i+32, perShard); j++ {
				batch = append(batch, shardSeq(sh, uint64(j)))
			}
			require.NoError(t, pub.PublishShardAsync(sh, batch).Wait(ctx))
		}
	}
}

// checkPayload fails unless msg carries its own record's payload.
func checkPayload(t *testing.T, msg client.QueueMessage) {
	if got, want := seqOf(msg.Payload), seqOf(shardSeq(msg.Shard, msg.Offset)); got != want {
		t.Errorf("shard %d offset %d: payload of shard %d offset %d", msg.Shard, msg.Offset, got>>32, got&(1<<32-1))
	}
}

// groupInflight sums the broker's in-flight records of a group over its
// shards.
func groupInflight(h *harness) (total int, perShard map[uint32]int) {
	perShard = map[uint32]int{}
	for _, g := range h.b.Stats().Groups {
		total += g.Inflight
		perShard[g.Shard] += g.Inflight
	}
	return total, perShard
}

// Two members of one group over three shards: every record of every shard
// is delivered and acked exactly once, and each member sees each shard's
// offsets in increasing order.
func TestGroupShardsEveryRecordOnceAcrossTwoMembers(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, shardedSpec("jobs", "periodic", 3))
	ctx := ctxT(t, 60*time.Second)
	const shards, perShard = 3, 200
	type ref = client.QueueRef
	var (
		mu        sync.Mutex
		seen      = map[ref]int{}
		perMember [2]int
		wg        sync.WaitGroup
	)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for m := range 2 {
		q, err := h.dial(t).Consume(ctx, "default", "jobs", "workers", client.QueueOptions{Member: string(rune('a' + m)), MaxInflight: 16})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := map[uint32]int64{0: -1, 1: -1, 2: -1}
			for {
				msg, err := q.Next(cctx)
				if err != nil {
					return
				}
				checkPayload(t, msg)
				if msg.Redeliveries != 0 || int64(msg.Offset) <= last[msg.Shard] {
					t.Errorf("member %d shard %d offset %d: redeliveries %d, after offset %d", m, msg.Shard, msg.Offset, msg.Redeliveries, last[msg.Shard])
				}
				last[msg.Shard] = int64(msg.Offset)
				if err := q.Ack(cctx, msg.Ref()); err != nil {
					if cctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				seen[msg.Ref()]++
				perMember[m]++
				if len(seen) == shards*perShard {
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	publishShards(t, ctx, h, "jobs", shards, perShard)
	wg.Wait()
	require.Len(t, seen, shards*perShard)
	for r, k := range seen {
		require.Equal(t, 1, k, "shard %d offset %d delivered %d times", r.Shard, r.Offset, k)
	}
	for m, k := range perMember {
		require.NotZero(t, k, "member %d got nothing", m)
	}
	groups := h.b.Stats().Groups
	require.Len(t, groups, shards)
	for i, g := range groups {
		require.Equal(t, broker.GroupStats{Stream: "t1/default/jobs", Shard: uint32(i), Group: "workers",
			Committed: perShard, Next: perShard, Tail: perShard}, g)
	}
}

// A member that goes away mid-batch gives back its unacked records of every
// shard; the other member gets them with a redelivery count, and nothing is
// lost.
func TestGroupShardsGoneMemberRedeliveredOnEveryShard(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, shardedSpec("jobs", "periodic", 3))
	ctx := ctxT(t, 60*time.Second)
	const shards, perShard = 3, 50
	publishShards(t, ctx, h, "jobs", shards, perShard)

	victim := h.dial(t)
	qa, err := victim.Consume(ctx, "default", "jobs", "g", client.QueueOptions{Member: "victim", MaxInflight: 12})
	require.NoError(t, err)
	taken := map[client.QueueRef]bool{}
	takenShards := map[uint32]bool{}
	for range 12 {
		msg, err := qa.Next(ctx)
		require.NoError(t, err)
		taken[msg.Ref()] = true
		takenShards[msg.Shard] = true
	}
	require.Len(t, takenShards, shards, "the member takes from every shard, not the first only")
	require.NoError(t, victim.Close()) // gone mid-batch: nothing acked
	require.Eventually(t, func() bool { n, _ := groupInflight(h); return n == 0 }, 10*time.Second, time.Millisecond)

	qb, err := h.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{Member: "survivor", MaxInflight: 10})
	require.NoError(t, err)
	acked := map[client.QueueRef]bool{}
	for len(acked) < shards*perShard {
		msg, err := qb.Next(ctx)
		require.NoError(t, err)
		checkPayload(t, msg)
		if taken[msg.Ref()] {
			require.GreaterOrEqual(t, msg.Redeliveries, uint64(1), "shard %d offset %d was out to the victim", msg.Shard, msg.Offset)
			delete(taken, msg.Ref())
		}
		require.False(t, acked[msg.Ref()], "shard %d offset %d delivered again after its ack", msg.Shard, msg.Offset)
		require.NoError(t, qb.Ack(ctx, msg.Ref()))
		acked[msg.Ref()] = true
	}
	require.Empty(t, taken, "every record the victim held was redelivered")
}

// A broker started on a crash image keeps every shard's answered acks and
// delivers every other record of every shard; records delivered and not
// acked before come back.
func TestGroupShardsCrashImageKeepsAckedPositionsPerShard(t *testing.T) {
	dir := t.TempDir()
	h := serveBroker(t, broker.Config{DataDir: dir}, shardedSpec("jobs", "on_commit", 3))
	ctx := ctxT(t, 60*time.Second)
	const shards, perShard = 3, 40
	publishShards(t, ctx, h, "jobs", shards, perShard)
	q, err := h.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{MaxInflight: 24})
	require.NoError(t, err)
	acked := map[client.QueueRef]bool{}
	unacked := map[client.QueueRef]bool{}
	for i := range 60 {
		msg, err := q.Next(ctx)
		require.NoError(t, err)
		if i%4 == 3 { // leave every fourth record unacked
			unacked[msg.Ref()] = true
			continue
		}
		require.NoError(t, q.Ack(ctx, msg.Ref()))
		acked[msg.Ref()] = true
	}
	for sh := range uint32(shards) {
		require.Contains(t, acked, client.QueueRef{Shard: sh, Offset: 0}, "every shard had acks before the crash")
	}
	image := t.TempDir()
	copyTree(t, dir, image) // the broker keeps running: no final write

	h2 := serveBroker(t, broker.Config{DataDir: image})
	q2, err := h2.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{MaxInflight: 64})
	require.NoError(t, err)
	got := map[client.QueueRef]bool{}
	for len(got) < shards*perShard-len(acked) {
		msg, err := q2.Next(ctx)
		require.NoError(t, err)
		checkPayload(t, msg)
		require.False(t, acked[msg.Ref()], "shard %d offset %d was acked (queue_ok) before the crash", msg.Shard, msg.Offset)
		got[msg.Ref()] = true
		require.NoError(t, q2.AckAsync(msg.Ref()))
	}
	for r := range unacked {
		require.True(t, got[r], "unacked shard %d offset %d came back", r.Shard, r.Offset)
	}
	for sh := range uint32(shards) {
		for off := range uint64(perShard) {
			r := client.QueueRef{Shard: sh, Offset: off}
			require.True(t, acked[r] || got[r], "shard %d offset %d lost", sh, off)
		}
	}
}

// A clean restart keeps every shard's acked position and counts the
// earlier deliveries of the records not acked.
func TestGroupShardsRestartKeepsPositionsPerShard(t *testing.T) {
	dir := t.TempDir()
	h := serveBroker(t, broker.Config{DataDir: dir}, shardedSpec("jobs", "periodic", 3))
	ctx := ctxT(t, 60*time.Second)
	const shards, perShard = 3, 10
	publishShards(t, ctx, h, "jobs", shards, perShard)
	q, err := h.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{MaxInflight: 9})
	require.NoError(t, err)
	acked, unacked := map[client.QueueRef]bool{}, map[client.QueueRef]bool{}
	for i := range 9 {
		msg, err := q.Next(ctx)
		require.NoError(t, err)
		if i%3 == 0 {
			require.NoError(t, q.AckAsync(msg.Ref()))
			acked[msg.Ref()] = true
		} else {
			unacked[msg.Ref()] = true
		}
	}
	first := client.QueueRef{Shard: 0, Offset: 0}
	require.True(t, acked[first])
	require.NoError(t, q.Ack(ctx, first), "a sync ack after the async ones: all durable")
	require.NoError(t, h.b.Close())

	h2 := serveBroker(t, broker.Config{DataDir: dir})
	q2, err := h2.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{})
	require.NoError(t, err)
	got := map[client.QueueRef]bool{}
	for len(got) < shards*perShard-len(acked) {
		msg, err := q2.Next(ctx)
		require.NoError(t, err)
		require.False(t, acked[msg.Ref()], "shard %d offset %d was acked before the restart", msg.Shard, msg.Offset)
		require.False(t, got[msg.Ref()], "shard %d offset %d twice", msg.Shard, msg.Offset)
		got[msg.Ref()] = true
		// Records the member held unacked were delivered before; others
		// may have been too (taken after the acks freed room, not read).
		if unacked[msg.Ref()] {
			require.Equal(t, uint64(1), msg.Redeliveries, "shard %d offset %d", msg.Shard, msg.Offset)
		}
	}
}

// max_inflight bounds a member's unacked records over all shards together,
// and the member takes from every shard.
func TestGroupShardsMaxInflightAcrossShards(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, shardedSpec("jobs", "periodic", 3))
	ctx := ctxT(t, 30*time.Second)
	publishShards(t, ctx, h, "jobs", 3, 20)
	q, err := h.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{MaxInflight: 6, VisibilityTimeout: time.Minute})
	require.NoError(t, err)
	var got []client.QueueMessage
	for range 6 {
		msg, err := q.Next(ctx)
		require.NoError(t, err)
		got = append(got, msg)
	}
	overBudget := func() bool { n, _ := groupInflight(h); return n > 6 }
	require.Never(t, overBudget, 100*time.Millisecond, 5*time.Millisecond, "a seventh take")
	total, perShard := groupInflight(h)
	require.Equal(t, 6, total)
	require.Equal(t, map[uint32]int{0: 2, 1: 2, 2: 2}, perShard, "a fair share of the budget per shard")

	require.NoError(t, q.Ack(ctx, got[0].Ref(), got[3].Ref()), "one ack call over two shards")
	for range 2 {
		_, err := q.Next(ctx)
		require.NoError(t, err)
	}
	require.Never(t, overBudget, 100*time.Millisecond, 5*time.Millisecond, "a take past the budget after the acks")
	total, _ = groupInflight(h)
	require.Equal(t, 6, total)
}

// Acks name their shard; a shard outside the stream is refused precisely;
// an ack without a shard (as clients from before multi-shard queues send
// it) is shard 0 on a single-shard stream and refused on more shards.
func TestGroupShardsAckRefusals(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, shardedSpec("jobs", "periodic", 3), durableSpec("one", "periodic"))
	ctx := ctxT(t, 20*time.Second)
	publishShards(t, ctx, h, "jobs", 3, 1)
	q, err := h.dial(t).Consume(ctx, "default", "jobs", "g", client.QueueOptions{})
	require.NoError(t, err)
	var be *client.BrokerError
	err = q.Ack(ctx, client.QueueRef{Shard: 3, Offset: 0})
	require.ErrorAs(t, err, &be)
	require.Equal(t, "invalid request: queue: shard 3 not in [0, 3) for t1/default/jobs", be.Message)
	err = q.Nack(ctx, client.QueueRef{Shard: 7, Offset: 0})
	require.ErrorAs(t, err, &be)
	require.Equal(t, "invalid request: queue: shard 7 not in [0, 3) for t1/default/jobs", be.Message)
	err = q.Ack(ctx, client.QueueRef{Shard: 2, Offset: 5})
	require.ErrorAs(t, err, &be)
	require.Equal(t, "invalid request: queue: offset 5 of shard 2 was never delivered to group g", be.Message)
	for range 3 {
		msg, err := q.Next(ctx)
		require.NoError(t, err)
		require.NoError(t, q.Ack(ctx, msg.Ref()))
	}

	// A client from before multi-shard queues sends no shard: on a
	// single-shard stream that is shard 0; on more shards it is refused,
	// since its offsets could name a record of any shard.
	publishJobs(t, ctx, h, "one", 1)
	q1, err := h.dial(t).Consume(ctx, "default", "one", "g", client.QueueOptions{})
	require.NoError(t, err)
	msg, err := q1.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, uint32(0), msg.Shard)
	id := uint64(1)
	reply := rawGroupRequest(t, ctx, h, &wire.QueueAck{TenantID: "t1", Namespace: "default", Stream: "one", Group: "g", Offsets: []uint64{0}, RequestID: &id})
	require.Equal(t, &wire.QueueOK{RequestID: 1}, reply)
	require.Equal(t, uint64(1), committed(h, "t1/default/one", 0))
	reply = rawGroupRequest(t, ctx, h, &wire.QueueNack{TenantID: "t1", Namespace: "default", Stream: "jobs", Group: "g", Offsets: []uint64{0}, RequestID: &id})
	require.Equal(t, &wire.QueueError{RequestID: 1,
		Message: "invalid request: queue: queue_nack without shard on stream t1/default/jobs of 3 shards"}, reply)
	err = q1.Ack(ctx, client.QueueRef{Shard: 1, Offset: 0})
	require.ErrorAs(t, err, &be)
	require.Equal(t, "invalid request: queue: shard 1 not in [0, 1) for t1/default/one", be.Message)
}

// rawGroupRequest sends m on a control stream of its own connection, as a
// client with no notion of shards would, and returns the broker's answer.
func rawGroupRequest(t *testing.T, ctx context.Context, h *harness, m wire.Message) wire.Message {
	t.Helper()
	str, err := h.rawConn(t).OpenStreamSync(ctx)
	require.NoError(t, err)
	defer str.CancelRead(0)
	stop := context.AfterFunc(ctx, func() { str.SetReadDeadline(time.Now()) })
	defer stop()
	flags, caps := uint16(0), wire.CapQueue.Caps()
	frames := wire.AppendJSONFrame(nil, &wire.Auth{TenantID: "t1", Token: "dev", ClientFlags: &flags, ClientCaps: &caps})
	_, err = str.Write(wire.AppendJSONFrame(frames, m))
	require.NoError(t, err)
	fr := frameio.NewReader(str, 1<<20)
	for {
		_, payload, err := fr.Next()
		require.NoError(t, err)
		reply, err := wire.DecodeJSON(payload)
		require.NoError(t, err)
		if reply.Type() != wire.TypeAuthOK && reply.Type() != wire.TypeOK {
			return reply
		}
	}
}

// committed is a group's committed offset on one shard of stream.
func committed(h *harness, stream string, shard uint32) uint64 {
	for _, g := range h.b.Stats().Groups {
		if g.Stream == stream && g.Shard == shard {
			return g.Committed
		}
	}
	return 0
}

// A client that does not advertise multi-shard queues (capability 0x2000),
// as clients from before them, is refused on a stream of several shards
// with the old message: it would drop every record's shard and could ack
// none of them. On a single-shard stream it is served as before.
func TestGroupShardsNeedTheCapability(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, shardedSpec("jobs", "periodic", 3), shardedSpec("one", "periodic", 1))
	ctx := ctxT(t, 30*time.Second)
	old := h.dialWith(t, client.Config{Flags: wire.KnownCapabilities &^ wire.CapQueueShards})
	_, err := old.Consume(ctx, "default", "jobs", "g", client.QueueOptions{})
	require.ErrorContains(t, err, "has 3 shards; a client without capability 0x2000 (multi-shard queues) needs a single-shard stream")
	_, err = old.Consume(ctx, "default", "one", "g", client.QueueOptions{})
	require.NoError(t, err)
}
