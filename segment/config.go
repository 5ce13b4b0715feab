package segment

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults for the zero values of Config.
const (
	// DefaultSegmentBytes is the preallocated size of a segment. The published
	// Felix measured p999 append latency falling with segment size (256 MiB
	// ~0.9 ms, 16 MiB ~1.3 ms, 1 MiB ~30 ms with 16 publishers), because a
	// roll is a synchronous seal.
	DefaultSegmentBytes = 256 << 20
	// DefaultIndexSpacingBytes is the distance between sparse index entries.
	DefaultIndexSpacingBytes = 4096
	// DefaultInitialAllocBytes is the first preallocation of a segment.
	DefaultInitialAllocBytes = 1 << 20
)

// Space accounts the disk logs preallocate, so that a caller can bound it
// (per tenant, against the free space of the file system) before the file
// system runs out. A log calls it under its own lock: it must not call back
// into the log.
type Space interface {
	// Reserve is asked before a log preallocates n more bytes. An error
	// refuses them: the append that needed them fails with an error
	// wrapping ErrNoSpace (and the error), as when the file system is
	// full, and a later append tries again.
	Reserve(n int64) error
	// Release returns n bytes a log no longer holds: the unused tail of a
	// sealed segment, a segment retention removed.
	Release(n int64)
}

// WriteMode is how appended bytes reach the segment file.
type WriteMode uint8

const (
	// WriteModeDefault is WriteModeFD.
	WriteModeDefault WriteMode = iota
	// WriteModeFD writes each batch with one pwrite(2) into the file (the
	// mapping sees it through the page cache) and Sync is fdatasync(2).
	WriteModeFD
	// WriteModeMapped builds each batch directly in the shared mapping and
	// Sync is msync(MS_SYNC) of the dirty range.
	WriteModeMapped
)

func (m WriteMode) String() string {
	switch m {
	case WriteModeDefault:
		return "default"
	case WriteModeFD:
		return "fd"
	case WriteModeMapped:
		return "mapped"
	}
	return fmt.Sprintf("WriteMode(%d)", uint8(m))
}

// Config configures a Log. The zero value means the documented defaults.
type Config struct {
	// SegmentBytes is the size each segment is rolled at (and mapped at).
	// A batch larger than a segment gets a segment of its own, sized to
	// fit. Default DefaultSegmentBytes; at least one page.
	SegmentBytes int64
	// InitialAllocBytes is how much of a new segment is preallocated: the
	// allocation doubles (or grows to fit a batch) when records need more,
	// up to SegmentBytes, so disk use follows what is written rather than
	// the number of segments. Default min(SegmentBytes,
	// DefaultInitialAllocBytes).
	InitialAllocBytes int64
	// Space, if set, is asked before the log preallocates more disk and
	// told when it gives disk back (Space). Nil: only the file system says
	// no.
	Space Space
	// IndexSpacingBytes is how far apart (in bytes of log) index entries
	// are. Default DefaultIndexSpacingBytes.
	IndexSpacingBytes int64
	// BaseOffset is the offset of the first record of a new, empty log.
	BaseOffset uint64
	// FormatVersion is the version new segments are written at:
	// FormatVersion (3, the default) or FormatVersionV4, which may also hold
	// generation-start records (a replicated shard's log). Segments of
	// older versions are read and, for v2, appended to as before.
	FormatVersion uint16
	// RetentionBytes bounds the total bytes of the log; EnforceRetention
	// removes whole sealed segments from the head while it is exceeded.
	// 0 = off.
	RetentionBytes int64
	// RetentionAge removes sealed segments whose newest event (generation
	// records aside; the creation when there is none) is older.
	// 0 = off.
	RetentionAge time.Duration
	// KeepPartialBatches keeps a marked batch that the tail of the active
	// segment cuts short on Open. By default recovery drops it whole (one
	// append wrote it, and none of it was acknowledged); a replica's log
	// receives a leader's batch in several appends, each acknowledged, so
	// its recovery keeps what it finds.
	KeepPartialBatches bool
	// MustExist says the log was created before: Open refuses a missing
	// directory, or one without segments, with ErrMissing instead of
	// creating an empty log whose offsets would start over.
	MustExist bool
	// VerifyAllOnOpen scans every record of every segment on Open instead of
	// only the records after the last index entry of sealed segments.
	VerifyAllOnOpen bool
	// MaxMappedSegments bounds how many sealed segments are mapped at once:
	// the least recently read are unmapped, and mapped again when read.
	// Segments a reader holds stay mapped beyond it. 0 = no bound.
	MaxMappedSegments int
	// RepairChecksumTail lets Open truncate a damaged record at the very end
	// of the active segment that is not a provable torn write (bad header
	// CRC, bad payload CRC, offset out of order, over-limit length) when
	// nothing valid follows it. Without it Open refuses such a log.
	RepairChecksumTail bool
	// WriteMode picks how appends reach the file and what Sync does; reads
	// come from the mapping either way. The zero value is WriteModeFD, the
	// faster of the two where measured (doc.go, docs/storage-format.md).
	WriteMode WriteMode
	// FS is the file system; nil = the operating system's. Tests inject
	// faults through it.
	FS FS
	// Now is the clock for segment creation times; nil = time.Now.
	Now func() time.Time
	// Logger receives recovery and retention reports; nil = discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.IndexSpacingBytes == 0 {
		c.IndexSpacingBytes = DefaultIndexSpacingBytes
	}
	if c.InitialAllocBytes == 0 {
		c.InitialAllocBytes = DefaultInitialAllocBytes
	}
	if c.InitialAllocBytes > 0 {
		c.InitialAllocBytes = max(min(c.InitialAllocBytes, c.SegmentBytes), SegmentHeaderBytes+RecordHeaderBytes)
	}
	if c.WriteMode == WriteModeDefault {
		c.WriteMode = WriteModeFD
	}
	if c.FormatVersion == 0 {
		c.FormatVersion = FormatVersion
	}
	if c.FS == nil {
		c.FS = OSFS{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	minSeg := int64(SegmentHeaderBytes + RecordHeaderBytes)
	switch {
	case c.SegmentBytes < minSeg:
		return fmt.Errorf("%w: SegmentBytes %d below %d (header + one empty record)", ErrInvalidConfig, c.SegmentBytes, minSeg)
	case c.InitialAllocBytes < 0:
		return fmt.Errorf("%w: InitialAllocBytes %d is negative", ErrInvalidConfig, c.InitialAllocBytes)
	case c.IndexSpacingBytes <= 0:
		return fmt.Errorf("%w: IndexSpacingBytes %d must be positive", ErrInvalidConfig, c.IndexSpacingBytes)
	case c.RetentionBytes < 0:
		return fmt.Errorf("%w: RetentionBytes %d is negative", ErrInvalidConfig, c.RetentionBytes)
	case c.WriteMode > WriteModeMapped:
		return fmt.Errorf("%w: unknown WriteMode %v", ErrInvalidConfig, c.WriteMode)
	case c.MaxMappedSegments < 0:
		return fmt.Errorf("%w: MaxMappedSegments %d is negative", ErrInvalidConfig, c.MaxMappedSegments)
	case c.RetentionAge < 0:
		return fmt.Errorf("%w: RetentionAge %v is negative", ErrInvalidConfig, c.RetentionAge)
	case c.FormatVersion != FormatVersion && c.FormatVersion != FormatVersionV4:
		return fmt.Errorf("%w: FormatVersion %d: new segments are written at %d or %d", ErrInvalidConfig, c.FormatVersion, FormatVersion, FormatVersionV4)
	}
	return nil
}
