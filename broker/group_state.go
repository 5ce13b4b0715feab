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
// last state written. Acks that were answered with queue_ok were in it;
// acks without a request_id may not be, and their records are delivered
// again. A record is never skipped: only acked offsets are ever written as
// acked.
//
// Layout, little-endian, version 1:
//
//	magic "FXQG" | version u8 | 3 zero bytes | committed u64 | delivered u64 |
//	count u32 | count × acked offset u64 (strictly increasing, each in
//	(committed, delivered)) | CRC-32/IEEE of everything before it, u32
//
// committed: every offset below it is acked. delivered: every offset below it
// was handed to a member at least once, so after a restart those that are
// not acked go out with a redelivery count of at least 1.
type groupState struct {
	Committed uint64
	Delivered uint64
	Acked     []uint64
}

const (
	stateMagic   = "FXQG"
	stateVersion = 1
	stateHeader  = 4 + 4 + 8 + 8 + 4
	// maxStateAcked bounds the acked set a state may hold: it is at most
	// the in-flight records of every member, and this keeps a corrupt
	// count from asking for a huge allocation.
	maxStateAcked = 1 << 24
)

// errBadState is the category of every state decoding error.
var errBadState = errors.New("queue state corrupt")

func (s groupState) encode() []byte {
	b := make([]byte, 0, stateHeader+8*len(s.Acked)+4)
	b = append(b, stateMagic...)
	b = append(b, stateVersion, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, s.Committed)
	b = binary.LittleEndian.AppendUint64(b, s.Delivered)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s.Acked)))
	for _, off := range s.Acked {
		b = binary.LittleEndian.AppendUint64(b, off)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// decodeGroupState parses and validates a state file's bytes.
func decodeGroupState(b []byte) (groupState, error) {
	var s groupState
	if len(b) < stateHeader+4 {
		return s, fmt.Errorf("%w: %d bytes, need at least %d", errBadState, len(b), stateHeader+4)
	}
	if string(b[:4]) != stateMagic || b[4] != stateVersion || b[5]|b[6]|b[7] != 0 {
		return s, fmt.Errorf("%w: bad magic or version", errBadState)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return s, fmt.Errorf("%w: checksum mismatch", errBadState)
	}
	s.Committed = binary.LittleEndian.Uint64(b[8:])
	s.Delivered = binary.LittleEndian.Uint64(b[16:])
	n := binary.LittleEndian.Uint32(b[24:])
	if n > maxStateAcked || int(n) != (len(body)-stateHeader)/8 || (len(body)-stateHeader)%8 != 0 {
		return s, fmt.Errorf("%w: count %d does not match %d bytes", errBadState, n, len(body)-stateHeader)
	}
	if s.Delivered < s.Committed {
		return s, fmt.Errorf("%w: delivered %d below committed %d", errBadState, s.Delivered, s.Committed)
	}
	prev := s.Committed
	for i := range int(n) {
		off := binary.LittleEndian.Uint64(body[stateHeader+8*i:])
		if off <= prev || off >= s.Delivered {
			return groupState{}, fmt.Errorf("%w: acked offset %d out of order or range", errBadState, off)
		}
		s.Acked = append(s.Acked, off)
		prev = off
	}
	return s, nil
}

// groupStatePath is where group's state on one shard lives under dataDir:
// one directory per stream shard (named like its log's), one file per group
// named by a readable prefix and a hash, since group names may hold any
// UTF-8. Shard 0's directory is the one single-shard queues always used.
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
