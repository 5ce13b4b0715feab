package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// CacheRecord is one change of one cache key. The same bytes are the
// payload of a durable cache's log record (docs/storage-format.md, "Cache
// log records") and of a watch event (docs/protocol.md, "Keyed watch"), so
// a change is encoded once for the disk and every watcher.
//
// Layout, big-endian, version 1:
//
//	u8  version (1)
//	u8  op (1 put, 2 delete, 3 counter)
//	u64 expires_at: Unix milliseconds, 0 = no expiry
//	u16 key_len, key (UTF-8, 1..MaxCacheKeyBytes bytes)
//	u32 value_len, value
//
// A delete has expires_at 0 and an empty value. A counter carries the new
// sum as canonical decimal ASCII ("-12", never "+12" or "012"), so a get of
// a counter key reads the same text an application would have put.
type CacheRecord struct {
	Op        CacheOp
	ExpiresAt uint64 // Unix ms; 0 = never
	Key       []byte
	Value     []byte
}

// CacheOp is what a CacheRecord does to its key.
type CacheOp uint8

// Cache record ops.
const (
	CacheOpPut     CacheOp = 1
	CacheOpDelete  CacheOp = 2
	CacheOpCounter CacheOp = 3
)

func (op CacheOp) String() string {
	switch op {
	case CacheOpPut:
		return "put"
	case CacheOpDelete:
		return "delete"
	case CacheOpCounter:
		return "counter"
	}
	return fmt.Sprintf("CacheOp(%d)", uint8(op))
}

// CacheRecordVersion is the only record version this package writes and
// reads. A new layout gets a new version byte; readers refuse versions they
// do not know rather than guess.
const CacheRecordVersion = 1

// CacheRecordHeaderBytes is the fixed part of a record: version, op,
// expiry, key length and value length.
const CacheRecordHeaderBytes = 1 + 1 + 8 + 2 + 4

// MaxCacheKeyBytes bounds a cache key.
const MaxCacheKeyBytes = 1024

// ErrBadCacheRecord: bytes that are not a valid cache record.
var ErrBadCacheRecord = errors.New("wire: bad cache record")

// CacheRecordError says what is wrong with a cache record.
type CacheRecordError struct{ Reason string }

func (e *CacheRecordError) Error() string { return "wire: bad cache record: " + e.Reason }

// Is maps to ErrBadCacheRecord.
func (e *CacheRecordError) Is(target error) bool { return target == ErrBadCacheRecord }

func badRecord(format string, args ...any) error {
	return &CacheRecordError{Reason: fmt.Sprintf(format, args...)}
}

// CacheRecordSize is the encoded size of r.
func CacheRecordSize(r CacheRecord) int {
	return CacheRecordHeaderBytes + len(r.Key) + len(r.Value)
}

// AppendCacheRecord appends r's encoding to dst after checking it with the
// same rules DecodeCacheRecord applies, so nothing written is unreadable.
func AppendCacheRecord(dst []byte, r CacheRecord) ([]byte, error) {
	if err := r.validate(); err != nil {
		return dst, err
	}
	dst = append(dst, CacheRecordVersion, byte(r.Op))
	dst = binary.BigEndian.AppendUint64(dst, r.ExpiresAt)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Value)))
	return append(dst, r.Value...), nil
}

// DecodeCacheRecord decodes b into r. Key and Value alias b. Every length is
// checked against what remains and trailing bytes are an error.
func DecodeCacheRecord(b []byte, r *CacheRecord) error {
	if len(b) < CacheRecordHeaderBytes {
		return badRecord("%d bytes, header needs %d", len(b), CacheRecordHeaderBytes)
	}
	if b[0] != CacheRecordVersion {
		return badRecord("version %d, want %d", b[0], CacheRecordVersion)
	}
	r.Op = CacheOp(b[1])
	r.ExpiresAt = binary.BigEndian.Uint64(b[2:])
	klen := int(binary.BigEndian.Uint16(b[10:]))
	rest := b[12:]
	if klen > len(rest)-4 {
		return badRecord("key length %d exceeds the %d bytes left", klen, len(rest)-4)
	}
	r.Key = rest[:klen:klen]
	rest = rest[klen:]
	vlen := uint64(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	if vlen != uint64(len(rest)) {
		return badRecord("value length %d, %d bytes left", vlen, len(rest))
	}
	r.Value = rest[:len(rest):len(rest)]
	return r.validate()
}

func (r CacheRecord) validate() error {
	switch {
	case len(r.Key) == 0:
		return badRecord("empty key")
	case len(r.Key) > MaxCacheKeyBytes:
		return badRecord("key of %d bytes over %d", len(r.Key), MaxCacheKeyBytes)
	case !utf8.Valid(r.Key):
		return badRecord("key is not UTF-8")
	case uint64(len(r.Value)) > 1<<32-1:
		return badRecord("value over 4 GiB")
	}
	switch r.Op {
	case CacheOpPut:
		return nil
	case CacheOpDelete:
		if r.ExpiresAt != 0 || len(r.Value) != 0 {
			return badRecord("delete with an expiry or a value")
		}
		return nil
	case CacheOpCounter:
		if _, ok := ParseCounter(r.Value); !ok {
			return badRecord("counter value %q is not a canonical decimal int64", r.Value)
		}
		return nil
	}
	return badRecord("unknown op %d", uint8(r.Op))
}

// ParseCounter parses a counter's canonical decimal text: an optional '-',
// then digits without leading zeros ("0" itself excepted), in int64 range.
func ParseCounter(b []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	var canon [20]byte
	if err != nil || string(strconv.AppendInt(canon[:0], n, 10)) != string(b) {
		return 0, false
	}
	return n, true
}
