package replica

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/segment"
)

// storage is raft's view of the replica: the log (index i is offset i-1)
// and the state. raft calls it on the group's goroutine, which also
// appends; mu guards st for the accessors other goroutines use (Status).
type storage struct {
	log *segment.Log
	mu  sync.Mutex
	st  *state

	// recent are the entries appended last, by index, contiguous, the
	// last of them the log's last, until they are applied: raft lets go
	// of its own copy once they are written, and asks for them back one
	// round trip later to apply them (and a leader to send them to a
	// follower a little behind). Served from here they are not read from
	// the log, checked and encoded again. Raft never changes an entry, so
	// they are shared as they are. The group's goroutine alone uses them.
	recent      []*pb.Entry
	recentBytes int
}

// recentMax bounds the data of the entries storage keeps: past it the
// oldest are read from the log again.
const recentMax = 16 << 20

// remember keeps ents, just appended (replacing any entries from their
// first index on).
func (s *storage) remember(ents []*pb.Entry) {
	first := ents[0].GetIndex()
	if n := len(s.recent); n > 0 && s.recent[0].GetIndex() < first && first <= s.recent[n-1].GetIndex()+1 {
		s.drop(int(first-s.recent[0].GetIndex()), n)
	} else {
		s.drop(0, n)
	}
	for _, e := range ents {
		s.recentBytes += len(e.Data)
	}
	s.recent = append(s.recent, ents...)
	s.forget(0)
}

// forget lets go of the entries up to applied, and of the oldest while
// they hold more than recentMax.
func (s *storage) forget(applied uint64) {
	i := 0
	for i < len(s.recent) && (s.recent[i].GetIndex() <= applied || s.recentBytes > recentMax) {
		s.recentBytes -= len(s.recent[i].Data)
		i++
	}
	if i > 0 {
		clear(s.recent[:i])
		s.recent = s.recent[i:]
	}
}

// forgetAll lets go of every entry kept (the log was reset).
func (s *storage) forgetAll() { s.drop(0, len(s.recent)) }

// drop lets go of recent[from:to], to being its length.
func (s *storage) drop(from, to int) {
	for _, e := range s.recent[from:to] {
		s.recentBytes -= len(e.Data)
	}
	clear(s.recent[from:to])
	s.recent = s.recent[:from]
}

// cached is Entries served from recent; false when [lo, hi) is not all
// there. The slice is raft's own: raft keeps it (in a Ready, in messages
// it sends) past the moment recent lets go of the entries.
func (s *storage) cached(lo, hi, maxSize uint64) ([]*pb.Entry, bool) {
	n := len(s.recent)
	if n == 0 || lo < s.recent[0].GetIndex() || hi-1 > s.recent[n-1].GetIndex() {
		return nil, false
	}
	base := s.recent[0].GetIndex()
	ents := s.recent[lo-base : hi-base]
	size := uint64(0)
	for i, e := range ents {
		size += uint64(proto.Size(e))
		if i > 0 && size > maxSize && !continuesBatch(e) {
			ents = ents[:i]
			break
		}
	}
	return slices.Clone(ents), true
}

var _ raft.Storage = (*storage)(nil)

func (s *storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.st.hs).(*pb.HardState), proto.Clone(s.st.cs).(*pb.ConfState), nil
}

// Entries reads [lo, hi) from the log, at least one entry and otherwise at
// most maxSize bytes of entries.
func (s *storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	first, last := s.firstIndex(), s.lastIndex()
	switch {
	case lo < first:
		return nil, raft.ErrCompacted
	case hi > last+1:
		return nil, fmt.Errorf("%w: entries [%d, %d) past the last index %d", raft.ErrUnavailable, lo, hi, last)
	case lo >= hi:
		return nil, nil
	}
	if ents, ok := s.cached(lo, hi, maxSize); ok {
		return ents, nil
	}
	r, err := s.log.NewReader(lo - 1)
	var te *segment.TrimmedError
	if errors.As(err, &te) {
		return nil, raft.ErrCompacted
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []*pb.Entry
	size := uint64(0)
	for i := lo; i < hi; i++ {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: entry %d", raft.ErrUnavailable, i)
		}
		if err != nil {
			return nil, err
		}
		e, err := entryOf(rec, s.termAt(i))
		if err != nil {
			return nil, err
		}
		size += uint64(proto.Size(e))
		// Past maxSize only to finish a batch: a follower catching up
		// then never holds part of one that a leader change could commit
		// as it is (a batch is at most one publish frame).
		if len(out) > 0 && size > maxSize && rec.Mark.Kind != segment.MarkContinues {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

func (s *storage) Term(i uint64) (uint64, error) {
	first, last := s.firstIndex(), s.lastIndex()
	switch {
	case i+1 < first:
		return 0, raft.ErrCompacted
	case i > last:
		return 0, raft.ErrUnavailable
	}
	return s.termAt(i), nil
}

func (s *storage) LastIndex() (uint64, error)  { return s.lastIndex(), nil }
func (s *storage) FirstIndex() (uint64, error) { return s.firstIndex(), nil }

func (s *storage) lastIndex() uint64  { return s.log.Next() }
func (s *storage) firstIndex() uint64 { return s.log.First() + 1 }

func (s *storage) termAt(i uint64) uint64 {
	if i == 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.termAt(i)
}

// Snapshot is where the log starts: a snapshot of no data at the entry
// before the first retained one, with the membership. A follower that
// needs it starts its log there (doc.go).
func (s *storage) Snapshot() (*pb.Snapshot, error) {
	i := s.firstIndex() - 1
	t := s.termAt(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	return &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index: proto.Uint64(i), Term: proto.Uint64(t), ConfState: proto.Clone(s.st.cs).(*pb.ConfState),
	}}, nil
}
