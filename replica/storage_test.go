package replica

import (
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/segment"
)

// storageWith is a storage over a new v4 log, and append writes entries
// to it as the group does.
func storageWith(t *testing.T) (*storage, func(term uint64, recs ...segment.Record) []*pb.Entry) {
	l, err := segment.Open(t.TempDir(), segment.Config{FormatVersion: segment.FormatVersionV4, KeepPartialBatches: true})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	s := &storage{log: l, st: &state{hs: &pb.HardState{}, cs: &pb.ConfState{}}}
	return s, func(term uint64, recs ...segment.Record) []*pb.Entry {
		first := l.Next() + 1
		ents := make([]*pb.Entry, len(recs))
		out := make([]segment.Record, len(recs))
		for i, r := range recs {
			ents[i] = &pb.Entry{Index: proto.Uint64(first + uint64(i)), Term: proto.Uint64(term), Data: eventData(r)}
			rec, err := recordOf(ents[i])
			require.NoError(t, err)
			out[i] = rec
		}
		_, err := l.AppendRecords(out)
		require.NoError(t, err)
		s.st.noteTerm(term, first)
		s.remember(ents)
		return ents
	}
}

// fromLog is Entries read from the log alone.
func fromLog(t *testing.T, s *storage, lo, hi, maxSize uint64) []*pb.Entry {
	kept, bytes := s.recent, s.recentBytes
	s.recent, s.recentBytes = nil, 0
	defer func() { s.recent, s.recentBytes = kept, bytes }()
	ents, err := s.Entries(lo, hi, maxSize)
	require.NoError(t, err)
	return ents
}

func requireSameEntries(t *testing.T, want, got []*pb.Entry) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].GetIndex(), got[i].GetIndex())
		require.Equal(t, want[i].GetTerm(), got[i].GetTerm())
		require.Equal(t, want[i].GetType(), got[i].GetType())
		require.Equal(t, want[i].Data, got[i].Data)
	}
}

// The entries storage keeps are those the log holds: served from memory
// after an append, after a tail was cut and replaced, and from the log
// once let go; a read limited in size stops where the log's would, never
// within an idempotent batch.
func TestStorageServesRecentEntriesAsTheLogWould(t *testing.T) {
	s, appendEnts := storageWith(t)
	ev := func(p string, m segment.Mark) segment.Record {
		return segment.Record{TimestampMicros: 7, Payload: []byte(p), Mark: m}
	}
	opens := segment.Mark{Kind: segment.MarkOpens, ProducerID: 1, Sequence: 1, Len: 3}
	cont := segment.Mark{Kind: segment.MarkContinues}
	appendEnts(1, ev("a", segment.Mark{}), ev("b", opens), ev("c", cont), ev("d", cont), ev("e", segment.Mark{}))
	got, err := s.Entries(1, 6, 1<<20)
	require.NoError(t, err)
	requireSameEntries(t, fromLog(t, s, 1, 6, 1<<20), got)
	require.Same(t, s.recent[0], got[0], "served from memory")
	kept := got

	// A read of one entry's size takes the whole batch it begins.
	one := uint64(proto.Size(got[1]))
	got, err = s.Entries(2, 6, one)
	require.NoError(t, err)
	requireSameEntries(t, fromLog(t, s, 2, 6, one), got)
	require.Len(t, got, 3)

	// A new leader's entries replace the tail from index 4.
	require.NoError(t, s.log.TruncateFrom(3))
	s.st.cutTerms(4)
	appendEnts(2, ev("x", segment.Mark{}), ev("y", segment.Mark{}))
	got, err = s.Entries(1, 6, 1<<20)
	require.NoError(t, err)
	requireSameEntries(t, fromLog(t, s, 1, 6, 1<<20), got)
	require.Equal(t, []byte("x"), got[3].Data[eventHead:])
	require.EqualValues(t, 2, got[3].GetTerm())

	// Applied entries are let go: read from the log again. What raft was
	// given stays as it was (it keeps it until Advance, and in messages).
	s.forget(3)
	for i, e := range kept {
		require.NotNil(t, e)
		require.EqualValues(t, i+1, e.GetIndex())
	}
	require.EqualValues(t, 4, s.recent[0].GetIndex())
	got, err = s.Entries(1, 6, 1<<20)
	require.NoError(t, err)
	requireSameEntries(t, fromLog(t, s, 1, 6, 1<<20), got)
	require.NotSame(t, s.recent[0], got[3])
	s.forgetAll()
	require.Empty(t, s.recent)
	require.Zero(t, s.recentBytes)
}
