package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/felixmq/felix/segment"
)

// A consumer group's committed position lives in one small file per group,
// replaced atomically (write a temporary file, fsync it, rename it over the
// old one, fsync the directory), the way streams.json is. The alternative,
// appending acks to a log, makes every restart replay the log and needs
// compaction; the state of a group is small (the lowest unacked offset plus
// the acked offsets above it, bounded by the members' in-flight limits), so
// rewriting it whole is cheap, and one write covers every ack made while the
// previous write was in progress (group commit).
//
// Crash semantics (at-least-once): after a crash the group resumes from the
// last state written. Acks that were answered with queue_ok (cache_ok for
// group_ack) were in it; acks without a request_id may not be, and their
// records are delivered again. A record is never skipped: only settled
// offsets are ever written as acked. A dead letter is listed in the same
// write that finishes it, so a crash leaves it either listed and finished,
// or neither (and owed again).
//
// Layout, little-endian, version 2 (version 1, the first four fields and
// the acked list, is still read: a group that had one exists, without a
// bound, dead letters or counts):
//
//	magic "FXQG" | version u8 | 3 zero bytes | committed u64 | delivered u64 |
//	max_attempts u32 | flags u32 (bit 0: exists) |
//	acked: count u32, count × u64 (strictly increasing, each in (committed, delivered)) |
//	dead: count u32, count × u64 (strictly increasing) |
//	redriven: count u32, count × u64 (strictly increasing, each below committed) |
//	attempts: count u32, count × (offset u64, deliveries u32) (strictly increasing offsets) |
//	CRC-32/IEEE of everything before it, u32
//
// committed: every offset below it is finished (acked or dead-lettered),
// except the redriven dead letters, which are owed again. delivered: every
// offset below it was handed to a member at least once, so after a restart
// those that are not finished count at least one attempt. attempts keeps
// the deliveries of records in play or owed, so a restart does not give a
// poison record a fresh set.
type groupState struct {
	Committed   uint64
	Delivered   uint64
	MaxAttempts uint32
	Exists      bool
	Acked       []uint64
	Dead        []uint64
	Redriven    []uint64
	Attempts    []offsetCount
}

// offsetCount is a record's delivery count.
type offsetCount struct {
	offset uint64
	count  uint64
}

const (
	stateMagic    = "FXQG"
	stateVersion  = 2
	stateHeaderV1 = 4 + 4 + 8 + 8 + 4
	// maxStateList bounds every list a state may hold (the acked set is at
	// most the in-flight records; dead letters accumulate until
	// discarded), and keeps a corrupt count from asking for a huge
	// allocation.
	maxStateList = 1 << 24
)

// errBadState is the category of every state decoding error.
var errBadState = errors.New("queue state corrupt")

func (s groupState) encode() []byte {
	b := make([]byte, 0, 48+8*(len(s.Acked)+len(s.Dead)+len(s.Redriven))+12*len(s.Attempts))
	b = append(b, stateMagic...)
	b = append(b, stateVersion, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, s.Committed)
	b = binary.LittleEndian.AppendUint64(b, s.Delivered)
	b = binary.LittleEndian.AppendUint32(b, s.MaxAttempts)
	var flags uint32
	if s.Exists {
		flags |= 1
	}
	b = binary.LittleEndian.AppendUint32(b, flags)
	for _, list := range [][]uint64{s.Acked, s.Dead, s.Redriven} {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(list)))
		for _, off := range list {
			b = binary.LittleEndian.AppendUint64(b, off)
		}
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s.Attempts)))
	for _, a := range s.Attempts {
		b = binary.LittleEndian.AppendUint64(b, a.offset)
		b = binary.LittleEndian.AppendUint32(b, uint32(min(a.count, 1<<32-1)))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// stateReader walks a state body, keeping the first error.
type stateReader struct {
	b   []byte
	err error
}

func (r *stateReader) take(n int) []byte {
	if r.err == nil && len(r.b) < n {
		r.err = fmt.Errorf("%w: truncated", errBadState)
	}
	if r.err != nil {
		return make([]byte, n)
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *stateReader) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *stateReader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }

// list reads a count and that many strictly increasing offsets, each
// accepted by ok.
func (r *stateReader) list(what string, ok func(uint64) bool) []uint64 {
	n := r.u32()
	if r.err == nil && (n > maxStateList || uint64(n)*8 > uint64(len(r.b))) {
		r.err = fmt.Errorf("%w: %s count %d does not fit %d bytes", errBadState, what, n, len(r.b))
	}
	if r.err != nil || n == 0 {
		return nil
	}
	out := make([]uint64, 0, n)
	for i := range int(n) {
		off := r.u64()
		if (i > 0 && off <= out[i-1]) || !ok(off) {
			r.err = fmt.Errorf("%w: %s offset %d out of order or range", errBadState, what, off)
			return nil
		}
		out = append(out, off)
	}
	return out
}

// decodeGroupState parses and validates a state file's bytes.
func decodeGroupState(b []byte) (groupState, error) {
	var s groupState
	if len(b) < stateHeaderV1+4 {
		return s, fmt.Errorf("%w: %d bytes, need at least %d", errBadState, len(b), stateHeaderV1+4)
	}
	if string(b[:4]) != stateMagic || (b[4] != 1 && b[4] != stateVersion) || b[5]|b[6]|b[7] != 0 {
		return s, fmt.Errorf("%w: bad magic or version", errBadState)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return s, fmt.Errorf("%w: checksum mismatch", errBadState)
	}
	r := stateReader{b: body[8:]}
	s.Committed, s.Delivered = r.u64(), r.u64()
	if r.err == nil && s.Delivered < s.Committed {
		return groupState{}, fmt.Errorf("%w: delivered %d below committed %d", errBadState, s.Delivered, s.Committed)
	}
	s.Exists = true
	if b[4] == stateVersion {
		s.MaxAttempts = r.u32()
		s.Exists = r.u32()&1 != 0
	}
	s.Acked = r.list("acked", func(off uint64) bool { return off > s.Committed && off < s.Delivered })
	if b[4] == stateVersion {
		s.Dead = r.list("dead", func(uint64) bool { return true })
		s.Redriven = r.list("redriven", func(off uint64) bool { return off < s.Committed })
		n := r.u32()
		if r.err == nil && (n > maxStateList || uint64(n)*12 > uint64(len(r.b))) {
			r.err = fmt.Errorf("%w: attempts count %d does not fit %d bytes", errBadState, n, len(r.b))
		}
		for i := 0; r.err == nil && i < int(n); i++ {
			a := offsetCount{offset: r.u64(), count: uint64(r.u32())}
			if i > 0 && a.offset <= s.Attempts[i-1].offset {
				r.err = fmt.Errorf("%w: attempts offset %d out of order", errBadState, a.offset)
			}
			s.Attempts = append(s.Attempts, a)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes after the state", errBadState, len(r.b))
	}
	if r.err != nil {
		return groupState{}, r.err
	}
	return s, nil
}

// groupStatePath is where group's state on one shard lives under dataDir:
// one directory per stream shard (named like its log's), one file per group
// named by a readable prefix and a hash, since group names may hold any
// UTF-8. Shard 0's directory is the one single-shard groups always used.
func groupStatePath(dataDir string, k StreamKey, shard uint32, group string) string {
	h := fnv.New64a()
	h.Write([]byte(group))
	var b strings.Builder
	for _, c := range group {
		if b.Len() == 32 {
			break
		}
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	name := fmt.Sprintf("%s-%016x.qstate", b.String(), h.Sum64())
	return filepath.Join(dataDir, "queues", segment.ShardDirName(k.Tenant, k.Namespace, k.Stream, shard), name)
}

// loadGroupState reads a group's state; a missing file is a new group.
func loadGroupState(path string) (groupState, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return groupState{}, nil
	}
	if err != nil {
		return groupState{}, err
	}
	s, err := decodeGroupState(raw)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// saveGroupState replaces the state file atomically and durably, through
// fsys (the storage's file system).
func saveGroupState(fsys segment.FS, path string, s groupState) error {
	return segment.WriteFileAtomic(fsys, path, s.encode())
}
