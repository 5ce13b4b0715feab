package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func seqs(bs []*idemBatch) []uint64 {
	var out []uint64
	for _, b := range bs {
		out = append(out, b.seq)
	}
	return out
}

// TestIdemWindow: sequences per shard, request ids per send (an answer to
// an earlier send is stale), re-sends in order from a sequence or all.
func TestIdemWindow(t *testing.T) {
	w := newIdemWindow()
	var a, b []*idemBatch
	for range 4 {
		x, y := &idemBatch{shard: 0}, &idemBatch{shard: 3}
		w.add(x)
		w.add(y)
		a, b = append(a, x), append(b, y)
	}
	require.Equal(t, []uint64{0, 1, 2, 3}, seqs(a))
	require.Equal(t, []uint64{0, 1, 2, 3}, seqs(b))

	old := a[1].req
	require.Same(t, a[0], w.answered(a[0].req))
	w.done(a[0])
	require.True(t, w.holds(0, 1))
	require.False(t, w.holds(0, 0))

	w.resendFrom(0, 2)
	w.resendFrom(0, 1) // the lowest wins
	due := w.due()
	require.Equal(t, []uint64{1, 2, 3}, seqs(due))
	require.Nil(t, w.answered(old), "the first send's answer is stale now")
	require.Same(t, a[1], w.answered(a[1].req))
	require.Empty(t, w.due(), "the schedule is cleared")

	w.resendAll = true
	require.Equal(t, []uint64{0, 1, 1, 2, 2, 3, 3}, seqs(w.due()), "every unanswered batch, in first-send order (shards 3 and 0 interleaved)")
	require.Len(t, w.drain(), 7)
	require.Empty(t, w.inflight)
	x := &idemBatch{}
	w.add(x)
	require.Equal(t, uint64(4), x.seq, "sequences go on after a drain")
}

// TestBackoffGrowsPerRound: a window of batches refused at once waits
// 10 ms, not the 1 s ceiling; each later round doubles, to the ceiling:
// 1 s, or noLeaderRetry while answers say the shard has no leader.
func TestBackoffGrowsPerRound(t *testing.T) {
	var b backoff
	now := time.Unix(1000, 0)
	for range 16 {
		require.Equal(t, 10*time.Millisecond, b.next(now, time.Second))
	}
	now = now.Add(10 * time.Millisecond)
	require.Equal(t, 20*time.Millisecond, b.next(now, time.Second))
	require.Equal(t, 20*time.Millisecond, b.next(now.Add(5*time.Millisecond), time.Second))
	for range 10 {
		now = now.Add(b.delay)
		b.next(now, time.Second)
	}
	require.Equal(t, time.Second, b.delay)
	require.Equal(t, noLeaderRetry, b.next(now, noLeaderRetry), "an election is retried at least every noLeaderRetry")
	for range 10 {
		now = now.Add(noLeaderRetry)
		require.Equal(t, noLeaderRetry, b.next(now, noLeaderRetry))
	}
}
