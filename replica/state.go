package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"slices"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/segment"
)

// StateFile is the name of the raft state beside a replicated shard's
// segments.
const StateFile = "raft.state"

// termStart is where a term's entries begin in the log.
type termStart struct{ term, index uint64 }

// state is what raft needs besides the log, as the state file holds it:
//
//	"FLRF" u32, version u16 = 1, reserved u16,
//	term u64, vote u64, commit u64,
//	snapshot index u64, snapshot term u64 (where a snapshot left the log),
//	conf state: u32 length + protobuf (raftpb.ConfState),
//	u32 count, count × (term u64, first index u64),
//	crc32 (IEEE) u32 over everything before it.
type state struct {
	hs       *pb.HardState
	cs       *pb.ConfState
	snapshot termStart // index and term of the entry a snapshot ended at
	terms    []termStart
}

const (
	stateMagic   = 0x464C5246 // "FLRF"
	stateVersion = 1
)

func (s *state) encode() ([]byte, error) {
	cs, err := proto.Marshal(s.cs)
	if err != nil {
		return nil, err
	}
	b := binary.BigEndian.AppendUint32(nil, stateMagic)
	b = binary.BigEndian.AppendUint16(b, stateVersion)
	b = binary.BigEndian.AppendUint16(b, 0)
	for _, v := range []uint64{s.hs.GetTerm(), s.hs.GetVote(), s.hs.GetCommit(), s.snapshot.index, s.snapshot.term} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(cs)))
	b = append(b, cs...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.terms)))
	for _, t := range s.terms {
		b = binary.BigEndian.AppendUint64(b, t.term)
		b = binary.BigEndian.AppendUint64(b, t.index)
	}
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b)), nil
}

func decodeState(b []byte) (*state, error) {
	bad := func(why string) (*state, error) { return nil, fmt.Errorf("%w: %s", ErrCorruptState, why) }
	if len(b) < 8+40+4+4+4 {
		return bad("short file")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return bad("checksum mismatch")
	}
	if binary.BigEndian.Uint32(body) != stateMagic || binary.BigEndian.Uint16(body[4:]) != stateVersion {
		return bad("magic or version")
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(body[8+8*i:]) }
	s := &state{
		hs:       &pb.HardState{Term: proto.Uint64(u(0)), Vote: proto.Uint64(u(1)), Commit: proto.Uint64(u(2))},
		snapshot: termStart{index: u(3), term: u(4)},
		cs:       &pb.ConfState{},
	}
	rest := body[48:]
	n := int(binary.BigEndian.Uint32(rest))
	if len(rest) < 4+n+4 {
		return bad("conf state length")
	}
	if err := proto.Unmarshal(rest[4:4+n], s.cs); err != nil {
		return bad("conf state: " + err.Error())
	}
	rest = rest[4+n:]
	count := int(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	if len(rest) != 16*count {
		return bad("term list length")
	}
	for i := range count {
		s.terms = append(s.terms, termStart{term: binary.BigEndian.Uint64(rest[16*i:]), index: binary.BigEndian.Uint64(rest[16*i+8:])})
	}
	return s, nil
}

// loadState reads dir's state file; a missing one is (nil, nil).
func loadState(fsys segment.FS, dir string) (*state, error) {
	b, err := segment.ReadFile(fsys, filepath.Join(dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replica: read state: %w", err)
	}
	return decodeState(b)
}

// save writes the state durably (atomic replace, synced).
func (s *state) save(fsys segment.FS, dir string) error {
	b, err := s.encode()
	if err != nil {
		return err
	}
	if err := segment.WriteFileAtomic(fsys, filepath.Join(dir, StateFile), b); err != nil {
		return fmt.Errorf("replica: save state: %w", err)
	}
	return nil
}

// termAt is the term of the entry at index i (i within the log or at the
// snapshot), from the term starts: the last term that began at or before i.
func (s *state) termAt(i uint64) uint64 {
	if i == s.snapshot.index {
		return s.snapshot.term
	}
	k, _ := slices.BinarySearchFunc(s.terms, i+1, func(t termStart, target uint64) int {
		switch {
		case t.index < target:
			return -1
		case t.index > target:
			return 1
		}
		return 0
	})
	if k == 0 {
		return s.snapshot.term // before the first known start: the snapshot's
	}
	return s.terms[k-1].term
}

// noteTerm records that term begins at index (an entry of a term newer
// than the last appended at its index).
func (s *state) noteTerm(term, index uint64) bool {
	if n := len(s.terms); n > 0 && s.terms[n-1].term >= term {
		return false
	}
	s.terms = append(s.terms, termStart{term: term, index: index})
	return true
}

// cutTerms forgets the term starts at index and after (the log is cut
// there).
func (s *state) cutTerms(index uint64) bool {
	k := len(s.terms)
	for k > 0 && s.terms[k-1].index >= index {
		k--
	}
	changed := k < len(s.terms)
	s.terms = s.terms[:k]
	return changed
}
