package replica

import (
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/segment"
)

// Every record a replica stores maps to the entry raft gave it and back:
// events with each mark, a term's empty entry, membership changes.
func TestEntriesAndRecordsMapBothWays(t *testing.T) {
	cc, err := proto.Marshal(&pb.ConfChange{Type: pb.ConfChangeType_ConfChangeAddNode.Enum(), NodeId: proto.Uint64(4)})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		e    *pb.Entry
	}{
		{"event", &pb.Entry{Index: proto.Uint64(8), Term: proto.Uint64(3), Type: pb.EntryType_EntryNormal.Enum(),
			Data: eventData(segment.Record{TimestampMicros: 77, Payload: []byte("hi")})}},
		{"opens a batch", &pb.Entry{Index: proto.Uint64(9), Term: proto.Uint64(3), Type: pb.EntryType_EntryNormal.Enum(),
			Data: eventData(segment.Record{TimestampMicros: 78, Payload: []byte("a"),
				Mark: segment.Mark{Kind: segment.MarkOpens, ProducerID: 5, Sequence: 6, Len: 2}})}},
		{"continues it", &pb.Entry{Index: proto.Uint64(10), Term: proto.Uint64(3), Type: pb.EntryType_EntryNormal.Enum(),
			Data: eventData(segment.Record{TimestampMicros: 78, Payload: []byte("b"), Mark: segment.Mark{Kind: segment.MarkContinues}})}},
		{"headers and a publisher", &pb.Entry{Index: proto.Uint64(11), Term: proto.Uint64(3), Type: pb.EntryType_EntryNormal.Enum(),
			Data: eventData(segment.Record{TimestampMicros: 79, Payload: []byte("c"), Headers: []byte{0, 1, 'k'}, Publisher: []byte("alice")})}},
		{"empty event", &pb.Entry{Index: proto.Uint64(11), Term: proto.Uint64(3), Type: pb.EntryType_EntryNormal.Enum(),
			Data: eventData(segment.Record{TimestampMicros: 79})}},
		{"term start", &pb.Entry{Index: proto.Uint64(12), Term: proto.Uint64(4), Type: pb.EntryType_EntryNormal.Enum()}},
		{"membership", &pb.Entry{Index: proto.Uint64(13), Term: proto.Uint64(4), Type: pb.EntryType_EntryConfChange.Enum(), Data: cc}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := recordOf(tc.e)
			require.NoError(t, err)
			require.Equal(t, tc.e.GetIndex()-1, rec.Offset)
			// Through a log, as a replica stores it.
			l, err := segment.Open(t.TempDir(), segment.Config{FormatVersion: segment.FormatVersionV4, KeepPartialBatches: true})
			require.NoError(t, err)
			defer l.Close()
			require.NoError(t, l.Reset(rec.Offset))
			_, err = l.AppendRecords([]segment.Record{rec})
			require.NoError(t, err)
			r, err := l.NewReader(rec.Offset)
			require.NoError(t, err)
			defer r.Close()
			stored, err := r.Next()
			require.NoError(t, err)
			back, err := entryOf(stored, tc.e.GetTerm())
			require.NoError(t, err)
			require.True(t, proto.Equal(tc.e, back), "%v != %v", tc.e, back)
		})
	}
}

// The state file round-trips, and a damaged one is refused.
func TestStateFileRoundTrip(t *testing.T) {
	st := &state{hs: &pb.HardState{Term: proto.Uint64(5), Vote: proto.Uint64(2), Commit: proto.Uint64(99)},
		cs: &pb.ConfState{Voters: []uint64{1, 2, 3}}, snapshot: termStart{index: 10, term: 2},
		terms: []termStart{{3, 20}, {5, 80}}}
	b, err := st.encode()
	require.NoError(t, err)
	got, err := decodeState(b)
	require.NoError(t, err)
	require.True(t, proto.Equal(st.hs, got.hs))
	require.True(t, proto.Equal(st.cs, got.cs))
	require.Equal(t, st.snapshot, got.snapshot)
	require.Equal(t, st.terms, got.terms)
	for _, i := range []uint64{10, 19, 20, 79, 80, 500} {
		require.Equal(t, map[uint64]uint64{10: 2, 19: 2, 20: 3, 79: 3, 80: 5, 500: 5}[i], got.termAt(i), "index %d", i)
	}
	b[len(b)/2] ^= 1
	_, err = decodeState(b)
	require.ErrorIs(t, err, ErrCorruptState)
}

// The log is the authority on term starts: a saved list that lost the
// newest start (a crash between the write and the save), or names one the
// log no longer holds, is mended from the log's generation records.
func TestTermsRebuiltFromTheLog(t *testing.T) {
	l, err := segment.Open(t.TempDir(), segment.Config{FormatVersion: segment.FormatVersionV4})
	require.NoError(t, err)
	defer l.Close()
	gen := func(term uint64) segment.Record {
		rec, err := recordOf(&pb.Entry{Index: proto.Uint64(l.Next() + 1), Term: proto.Uint64(term), Type: pb.EntryType_EntryNormal.Enum()})
		require.NoError(t, err)
		return rec
	}
	ev := segment.Record{Payload: []byte("e")}
	for _, r := range []segment.Record{gen(1), ev, ev, gen(2), ev, gen(4), ev} {
		_, err := l.AppendRecords([]segment.Record{r})
		require.NoError(t, err)
	}
	st := &state{hs: &pb.HardState{}, cs: &pb.ConfState{}, terms: []termStart{{1, 1}, {3, 4}}} // 3 is wrong, 4 missing
	require.NoError(t, rebuildTerms(l, st))
	require.Equal(t, []termStart{{1, 1}, {2, 4}, {4, 6}}, st.terms)
}
