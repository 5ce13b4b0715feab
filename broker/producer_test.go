package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProducerTableDecisions walks one producer through every verdict.
func TestProducerTableDecisions(t *testing.T) {
	tb := newProducerTable()
	require.Equal(t, verdictUnknown, tb.decide(7, 3).verdict, "no state and not sequence 0")
	require.Equal(t, verdictAppend, tb.decide(7, 0).verdict, "a new producer starts at 0")
	for seq := range uint64(100) {
		require.Equal(t, verdictAppend, tb.decide(7, seq).verdict)
		tb.record(7, seq, batchRef{first: 1000 + 10*seq, count: 10, held: 10})
	}
	require.Equal(t, decision{verdict: verdictGap, expected: 100}, tb.decide(7, 105))
	require.Equal(t, verdictAppend, tb.decide(7, 100).verdict)
	for _, seq := range []uint64{99, 50, 36} { // the last 64: 36..99
		d := tb.decide(7, seq)
		require.Equal(t, verdictDuplicate, d.verdict, "seq %d", seq)
		require.Equal(t, batchRef{first: 1000 + 10*seq, count: 10, held: 10}, d.batch)
	}
	require.Equal(t, verdictExpired, tb.decide(7, 35).verdict)
	require.Equal(t, verdictExpired, tb.decide(7, 0).verdict)

	// A producer that starts again at 0 after it was forgotten (a log that
	// holds both lives) keeps only its new life.
	tb.record(7, 0, batchRef{first: 5000, count: 1, held: 1})
	require.Equal(t, decision{verdict: verdictDuplicate, batch: batchRef{first: 5000, count: 1, held: 1}}, tb.decide(7, 0))
	require.Equal(t, verdictAppend, tb.decide(7, 1).verdict)
	require.Equal(t, decision{verdict: verdictGap, expected: 1}, tb.decide(7, 2))
}

// TestProducerTableForgetsTheOldest: past maxProducers, the producer whose
// newest batch is the oldest goes first, whatever order they began in.
func TestProducerTableForgetsTheOldest(t *testing.T) {
	tb := newProducerTable()
	off := uint64(0)
	for id := range uint64(maxProducers) {
		tb.record(id, 0, batchRef{first: off, count: 1, held: 1})
		off++
	}
	tb.record(0, 1, batchRef{first: off, count: 1, held: 1}) // producer 0 is now the newest
	off++
	tb.record(maxProducers, 0, batchRef{first: off, count: 1, held: 1})
	require.Equal(t, maxProducers, tb.len())
	require.Equal(t, verdictAppend, tb.decide(0, 2).verdict, "producer 0 stays")
	require.Equal(t, verdictUnknown, tb.decide(1, 1).verdict, "producer 1 was the oldest")
	require.Equal(t, verdictAppend, tb.decide(2, 1).verdict)
}

// TestProducerTableForgetBelow: retention removes a producer's oldest
// batches; a producer with none left is forgotten.
func TestProducerTableForgetBelow(t *testing.T) {
	tb := newProducerTable()
	for seq := range uint64(10) {
		tb.record(1, seq, batchRef{first: seq * 100, count: 1, held: 1})
	}
	tb.record(2, 0, batchRef{first: 50, count: 1, held: 1})
	tb.forgetBelow(500)
	require.Equal(t, verdictExpired, tb.decide(1, 4).verdict)
	require.Equal(t, verdictDuplicate, tb.decide(1, 5).verdict)
	require.Equal(t, verdictUnknown, tb.decide(2, 1).verdict, "its only batch is gone")
	require.Equal(t, 1, tb.len())
	tb.forgetBelow(1 << 40)
	require.Zero(t, tb.len())
	require.Nil(t, tb.front)
	require.Nil(t, tb.back)
}
