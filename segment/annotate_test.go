package segment

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPublisherAndHeadersRollTheVersionUp: a batch with a publisher rolls
// a v3 segment to v6, one with headers to FormatVersionHeaders; later
// segments keep the version (a plain batch after them does not roll), and
// everything reads back the same after a reopen, with marks intact.
func TestPublisherAndHeadersRollTheVersionUp(t *testing.T) {
	for _, fd := range []bool{false, true} {
		t.Run(map[bool]string{false: "mapped", true: "fd"}[fd], func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{SegmentBytes: 4096, IndexSpacingBytes: 64, WriteMode: writeMode(fd)}
			l := openLog(t, dir, cfg)
			hb := []byte{1, 1, 'k', 0, 1, 'v'}
			batches := []*Batch{
				{Payloads: [][]byte{[]byte("a"), []byte("b")}, TS: 1},
				{Payloads: [][]byte{[]byte("c")}, TS: 2, Publisher: []byte("alice")},
				{Payloads: [][]byte{[]byte("d"), []byte("e")}, TS: 3, Publisher: []byte("bob"), Headers: [][]byte{hb, nil},
					Mark: &BatchMark{ProducerID: 9, Sequence: 0}},
				{Payloads: [][]byte{[]byte("f")}, TS: 4},
			}
			var want []Record
			var versions []uint16
			for _, b := range batches {
				first, err := l.AppendBatch(b)
				require.NoError(t, err)
				for i, p := range b.Payloads {
					r := Record{Offset: first + uint64(i), TimestampMicros: b.TS, Payload: p, Publisher: b.Publisher}
					if b.Headers != nil {
						r.Headers = b.Headers[i]
					}
					if b.Mark != nil {
						r.Mark = recordMark(b.Mark, i, len(b.Payloads))
					}
					want = append(want, r)
				}
				l.mu.Lock()
				versions = append(versions, l.mu.segs[len(l.mu.segs)-1].version)
				l.mu.Unlock()
			}
			require.Equal(t, []uint16{FormatVersion, FormatVersionPublisher, FormatVersionHeaders, FormatVersionHeaders}, versions)
			require.Equal(t, uint64(2), l.Stats().Rolls, "one roll per version raised, none after")
			require.NoError(t, l.Sync())
			require.Equal(t, want, readAll(t, l, 0))
			require.NoError(t, l.Close())

			l2 := openLog(t, dir, cfg)
			require.Equal(t, want, readAll(t, l2, 0))
			var seen []MarkedBatch
			require.NoError(t, l2.Batches(0, func(b MarkedBatch) bool { seen = append(seen, b); return true }))
			require.Equal(t, []MarkedBatch{{First: 3, ProducerID: 9, Sequence: 0, Len: 2, Held: 2, TimestampMicros: 3}}, seen)
		})
	}
}

func TestAppendBatchRejects(t *testing.T) {
	l := openLog(t, t.TempDir(), Config{})
	long := make([]byte, MaxPublisherBytes+1)
	_, err := l.AppendBatch(&Batch{Payloads: [][]byte{nil}, Publisher: long})
	require.ErrorIs(t, err, ErrRecordTooLarge)
	_, err = l.AppendBatch(&Batch{Payloads: [][]byte{nil}, Headers: [][]byte{nil, nil}})
	require.Error(t, err)
	_, err = l.AppendBatch(&Batch{Payloads: [][]byte{make([]byte, MaxPayloadBytes)}, Headers: [][]byte{{0}}})
	require.ErrorIs(t, err, ErrRecordTooLarge, "the headers bit takes the length's top bit")
}
