package segment

import (
	"errors"
	"fmt"
)

// Sentinel errors. Rich cases are the typed errors below, whose Is maps to
// one of these; test with errors.Is and errors.As.
var (
	// ErrCorrupt is the category of every *CorruptionError.
	ErrCorrupt = errors.New("segment: corrupt log")
	// ErrTrimmed is the category of every *TrimmedError: the requested offset
	// was removed by retention.
	ErrTrimmed = errors.New("segment: offset trimmed by retention")
	// ErrLogFailed is wrapped, with the cause, by every error a log returns
	// after a failed sync, seal or roll. The failure is terminal: the log
	// accepts no more appends and reports nothing more as durable.
	ErrLogFailed = errors.New("segment: log failed")
	// ErrClosed is returned by operations on a closed log or reader.
	ErrClosed = errors.New("segment: log closed")
	// ErrEmptyBatch is returned by Append for a batch without records.
	ErrEmptyBatch = errors.New("segment: empty batch")
	// ErrNoSpace is wrapped by Append when the file system has no room
	// (ENOSPC or EDQUOT) or Config.Space refuses: for the next segment, for
	// growing the active one, for sealing it. It is not terminal: the next
	// Append tries again, so the log recovers when space returns. (A write
	// error inside a segment's allocation stays terminal: what reached the
	// page cache is then unknown.)
	ErrNoSpace = errors.New("segment: no space (retried on the next append)")
	// ErrMissing is returned by Open with Config.MustExist when the log's
	// directory, or every segment in it, is gone: the records it held are
	// lost, and creating an empty log would reuse their offsets.
	ErrMissing = errors.New("segment: log missing")
	// ErrRecordTooLarge is returned by Append for a payload larger than
	// MaxPayloadBytes. It is not terminal.
	ErrRecordTooLarge = errors.New("segment: record too large")
	// ErrInvalidConfig is wrapped by every Config validation error.
	ErrInvalidConfig = errors.New("segment: invalid config")
	// ErrNotSupported is wrapped when the platform cannot do what was asked.
	ErrNotSupported = errors.New("segment: not supported")
)

// CorruptionKind names what was wrong, in the terms of the format
// (docs/storage-format.md, "Corruption verdicts").
type CorruptionKind string

// The kinds of corruption, one per verdict of the storage format.
const (
	KindSegmentMagic          CorruptionKind = "bad segment magic"
	KindSegmentVersion        CorruptionKind = "unsupported segment version"
	KindSegmentFlags          CorruptionKind = "non-zero segment flags"
	KindSegmentHeaderChecksum CorruptionKind = "bad segment header checksum"
	KindSegmentName           CorruptionKind = "segment name does not match its header"
	KindTruncated             CorruptionKind = "record cut off by end of file"
	KindRecordHeaderChecksum  CorruptionKind = "bad record header checksum"
	KindRecordChecksum        CorruptionKind = "bad record checksum"
	KindOffsetOutOfOrder      CorruptionKind = "record offset out of order"
	KindRecordTooLarge        CorruptionKind = "record length over limit"
	KindRecordFlags           CorruptionKind = "record kind bits the segment version does not define"
	KindRecordTrailer         CorruptionKind = "record publisher or headers length past its body"
	KindTrailingData          CorruptionKind = "data after the last record of a sealed segment"
	KindOffsetGap             CorruptionKind = "offsets not contiguous across segments"
)

// CorruptionError names the file and byte offset where a log is damaged.
// Open refuses to start on it rather than skip data silently.
type CorruptionError struct {
	Path   string         // file
	Offset int64          // byte position in the file
	Kind   CorruptionKind // what is wrong
	Detail string         // numbers for a human: expected vs found
}

func (e *CorruptionError) Error() string {
	s := fmt.Sprintf("segment: corrupt log: %s at %s byte %d", e.Kind, e.Path, e.Offset)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is maps the error to its category, ErrCorrupt.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// TrimmedError is returned when a read asks for an offset below the oldest
// retained one.
type TrimmedError struct {
	Requested uint64
	Oldest    uint64
}

func (e *TrimmedError) Error() string {
	return fmt.Sprintf("segment: offset %d trimmed by retention, oldest retained is %d", e.Requested, e.Oldest)
}

// Is maps the error to its category, ErrTrimmed.
func (e *TrimmedError) Is(target error) bool { return target == ErrTrimmed }
