package broker

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/segment"
)

// TestProducerTableExtendsFromItsCommittedBase: a replica's producer table,
// rebuilt at each new leadership from the committed base of the last
// rebuild plus what opens after it, is the table a walk of the whole log
// makes, whatever was appended and committed in between; and a rebuild
// reads only the batches that open after the base.
func TestProducerTableExtendsFromItsCommittedBase(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			log, err := segment.Open(t.TempDir(), segment.Config{SegmentBytes: 4096, IndexSpacingBytes: 256})
			require.NoError(t, err)
			defer log.Close()
			var id idempotence
			next := map[uint64]uint64{}
			commit := uint64(0)
			for round := range 30 {
				for range rng.IntN(8) {
					p := rng.Uint64N(6)
					payloads := make([][]byte, 1+rng.IntN(3))
					for i := range payloads {
						payloads[i] = fmt.Appendf(nil, "p%d-%d-%d", p, next[p], i)
					}
					if rng.IntN(5) == 0 { // a record of no producer between batches
						_, err := log.AppendBatch(&segment.Batch{Payloads: [][]byte{[]byte("plain")}})
						require.NoError(t, err)
					}
					_, err := log.AppendBatch(&segment.Batch{Payloads: payloads, Mark: &segment.BatchMark{ProducerID: p, Sequence: next[p]}})
					require.NoError(t, err)
					next[p]++
				}
				// Raft commits a prefix, which may end inside a batch.
				commit += rng.Uint64N(log.Next() - commit + 1)
				from := id.baseTo
				got, walked, err := id.extendLocked(log, commit)
				require.NoError(t, err)
				require.Equal(t, dumpTable(wholeLogTable(t, log)), dumpTable(got), "round %d, commit %d", round, commit)
				require.Equal(t, batchesFrom(t, log, from), walked, "round %d reads only what opens after the base", round)
				for _, b := range batchesOf(t, log) {
					if b.First+uint64(b.Len) > commit {
						require.LessOrEqual(t, id.baseTo, b.First, "the base holds only committed batches")
						break
					}
					require.Greater(t, id.baseTo, b.First, "the committed batches before the first uncommitted one are in the base")
				}
			}
		})
	}
}

func wholeLogTable(t *testing.T, log *segment.Log) *producerTable {
	tab := newProducerTable()
	for _, b := range batchesOf(t, log) {
		tab.record(b.ProducerID, b.Sequence, batchRef{first: b.First, count: b.Len, held: b.Held})
	}
	return tab
}

func batchesOf(t *testing.T, log *segment.Log) []segment.MarkedBatch {
	var out []segment.MarkedBatch
	require.NoError(t, log.Batches(log.First(), func(b segment.MarkedBatch) bool { out = append(out, b); return true }))
	return out
}

func batchesFrom(t *testing.T, log *segment.Log, from uint64) int {
	n := 0
	for _, b := range batchesOf(t, log) {
		if b.First >= from {
			n++
		}
	}
	return n
}

// dumpTable lists a table's producers oldest first, with their window.
func dumpTable(tab *producerTable) []string {
	var out []string
	for e := tab.front; e != nil; e = e.succ {
		s := fmt.Sprintf("%d next %d:", e.id, e.next)
		for q := e.next - uint64(e.held); q < e.next; q++ {
			b := e.batches[q%producerWindow]
			s += fmt.Sprintf(" %d@%d/%d/%d", q, b.first, b.count, b.held)
		}
		out = append(out, s)
	}
	return out
}
