package segment

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Log is one append-only log: a directory of segment files. See doc.go for
// the concurrency contract.
type Log struct {
	dir  string
	cfg  Config
	fs   FS
	stat counters

	// syncMu serialises Sync. Lock order: syncMu before mu.
	syncMu sync.Mutex

	mu struct {
		sync.Mutex
		segs   []*segment // ascending base; the last one is active
		failed error      // terminal failure, wraps ErrLogFailed
		closed bool
		stage  []byte   // batch staging buffer for WriteModeFD
		recs   []Record // AppendMarked's records, reused
		maps   mapCache
	}

	first          atomic.Uint64
	next           atomic.Uint64
	retentionFloor atomic.Uint64 // SetRetentionFloor
	durable        atomic.Uint64
	recovery       RecoveryStats
}

// Open opens (recovering) or creates the log in dir. See docs/storage-format.md
// for what recovery accepts, repairs and refuses.
func Open(dir string, cfg Config) (*Log, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, cfg: cfg, fs: cfg.FS}
	start := time.Now()
	segs, err := recoverDir(l.fs, dir, cfg, &l.recovery)
	if err != nil {
		return nil, err
	}
	l.recovery.Duration = time.Since(start)
	l.mu.segs = segs
	l.mu.maps.max = cfg.MaxMappedSegments
	for _, s := range segs[:len(segs)-1] {
		l.addMappedLocked(s)
	}
	active := segs[len(segs)-1]
	l.first.Store(segs[0].base)
	l.next.Store(active.next)
	l.durable.Store(active.next) // recovery wrote back whatever it kept
	cfg.Logger.Info("segment: log opened", "dir", dir, "segments", len(segs),
		"first", segs[0].base, "next", active.next, "truncated_bytes", l.recovery.TruncatedBytes,
		"duration", l.recovery.Duration)
	return l, nil
}

// Dir is the directory of the log.
func (l *Log) Dir() string { return l.dir }

// Next is the offset the next appended record gets.
func (l *Log) Next() uint64 { return l.next.Load() }

// First is the oldest retained offset (equal to Next when the log is empty).
func (l *Log) First() uint64 { return l.first.Load() }

// Durable is the offset below which every record is durable: synced by
// Sync, by a roll, or found on disk by recovery.
func (l *Log) Durable() uint64 { return l.durable.Load() }

// Append appends one batch of records, all with timestamp ts, and returns
// the offset of the first; the batch gets contiguous offsets and lands in a
// single segment. It makes nothing durable: call Sync. After a failed seal,
// roll or sync every Append fails with an error wrapping ErrLogFailed.
func (l *Log) Append(payloads [][]byte, ts int64) (uint64, error) {
	return l.AppendMarked(payloads, ts, nil)
}

// AppendMarked is Append with the batch marked as an idempotent producer's
// (mark nil: unmarked): its first record opens the batch with the
// producer, sequence and record count, the others continue it, so the
// producer's state can be rebuilt from the log (Batches). A v2 active
// segment cannot hold marks and is rolled first.
func (l *Log) AppendMarked(payloads [][]byte, ts int64, mark *BatchMark) (uint64, error) {
	return l.AppendBatch(&Batch{Payloads: payloads, TS: ts, Mark: mark})
}

// Batch is what one append writes: records with contiguous offsets, all
// with timestamp TS, in one segment.
type Batch struct {
	Payloads [][]byte
	TS       int64
	// Mark, when set, marks the batch as an idempotent producer's (v3).
	Mark *BatchMark
	// Publisher, when not nil, is stored with every record (v6): at most
	// MaxPublisherBytes.
	Publisher []byte
	// Headers, when not nil, holds one header block per payload, nil for
	// a payload without one (FormatVersionHeaders): each at most
	// MaxHeadersBytes.
	Headers [][]byte
}

// AppendBatch appends b and returns the offset of its first record; see
// Append. A segment of a version that cannot hold what b carries (marks,
// a publisher, headers) is rolled first, and every later segment keeps
// the version the log reached, so a log alternating between plain and
// annotated batches does not roll on each.
func (l *Log) AppendBatch(b *Batch) (uint64, error) {
	if len(b.Payloads) == 0 {
		return 0, ErrEmptyBatch
	}
	if b.Headers != nil && len(b.Headers) != len(b.Payloads) {
		return 0, fmt.Errorf("segment: %d header blocks for %d payloads", len(b.Headers), len(b.Payloads))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := l.mu.recs[:0]
	for i, p := range b.Payloads {
		r := Record{TimestampMicros: b.TS, Payload: p, Mark: recordMark(b.Mark, i, len(b.Payloads)), Publisher: b.Publisher}
		if b.Headers != nil {
			r.Headers = b.Headers[i]
		}
		recs = append(recs, r)
	}
	l.mu.recs = recs
	first, err := l.appendRecordsLocked(recs)
	clear(recs) // the payloads are the caller's
	return first, err
}

// AppendRecords appends records as they are given, each with its own
// timestamp, mark, headers and publisher (their Offset fields are not
// read: they get Next(), Next()+1, ...), in one segment, and returns the
// offset of the first. It is how a replica writes what its leader wrote,
// byte for byte. A generation record (MarkGeneration) needs a log whose
// Config.FormatVersion is v4 or later. Like Append it makes nothing
// durable.
func (l *Log) AppendRecords(recs []Record) (uint64, error) {
	if len(recs) == 0 {
		return 0, ErrEmptyBatch
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendRecordsLocked(recs)
}

// recordsVersion is the lowest segment version that holds recs.
func recordsVersion(recs []Record) uint16 {
	v := FormatVersionV2
	for _, r := range recs {
		switch {
		case r.Headers != nil:
			return FormatVersionHeaders
		case r.Publisher != nil:
			v = max(v, FormatVersionPublisher)
		case r.Mark.Kind == MarkGeneration:
			v = max(v, FormatVersionV4)
		case r.Mark.Kind != MarkNone:
			v = max(v, FormatVersion)
		}
	}
	return v
}

// recordsSize checks recs for a segment of version and returns their size
// in bytes.
func recordsSize(recs []Record, version uint16) (int64, error) {
	size := int64(0)
	for _, r := range recs {
		bd := r.body()
		if len(r.Publisher) > MaxPublisherBytes {
			return 0, fmt.Errorf("%w: publisher of %d bytes over %d", ErrRecordTooLarge, len(r.Publisher), MaxPublisherBytes)
		}
		if len(bd.headers) > MaxHeadersBytes || int64(bd.len()) > maxBody(version) {
			return 0, fmt.Errorf("%w: a record of %d bytes over %d", ErrRecordTooLarge, bd.len(), maxBody(version))
		}
		size += int64(RecordHeaderBytes + r.Mark.tagLen() + bd.len())
	}
	return size, nil
}

func (l *Log) appendRecordsLocked(recs []Record) (uint64, error) {
	need := recordsVersion(recs)
	if need == FormatVersionV4 && l.cfg.FormatVersion < FormatVersionV4 {
		return 0, fmt.Errorf("%w: a generation record needs format v4 (Config.FormatVersion)", ErrInvalidRecord)
	}
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	active := l.mu.segs[len(l.mu.segs)-1]
	need = max(need, active.version)
	size, err := recordsSize(recs, need)
	if err != nil {
		return 0, err
	}
	// A sealed last segment means a roll sealed it and then found no space
	// for the next one (ErrNoSpace): try that roll again.
	if active.sealed || active.written.Load()+size > int64(len(active.data)) || active.version < need {
		if err := l.rollLocked(size, need); err != nil {
			return 0, err
		}
		active = l.mu.segs[len(l.mu.segs)-1]
	}
	if active.written.Load()+size > active.allocated {
		if err := l.growLocked(active, size); err != nil {
			return 0, err
		}
	}
	first := active.next
	stage, err := active.appendLocked(recs, l.cfg.IndexSpacingBytes, l.mu.stage, l.cfg.WriteMode == WriteModeFD)
	l.mu.stage = stage
	if err != nil {
		// The file may now hold part of the batch past written; what the
		// page cache holds is unknown after an I/O error. Terminal.
		return 0, l.failLocked(err)
	}
	l.next.Store(active.next)
	l.stat.appends.Add(1)
	l.stat.records.Add(uint64(len(recs)))
	l.stat.bytes.Add(uint64(size))
	return first, nil
}

func (l *Log) usableLocked() error {
	if l.mu.closed {
		return ErrClosed
	}
	return l.mu.failed
}

// failLocked records a terminal failure (before anything else can observe
// the log again) and returns the error every later call gets.
func (l *Log) failLocked(cause error) error {
	if l.mu.failed == nil {
		l.mu.failed = fmt.Errorf("%w: %w", ErrLogFailed, cause)
		l.cfg.Logger.Error("segment: log failed; no more appends", "dir", l.dir, "err", cause)
	}
	return l.mu.failed
}

// Err is nil while the log is healthy, else its terminal failure.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.failed
}

// Sync makes every record appended before the call durable and advances
// Durable. In mapped mode it is msync(MS_SYNC) of the dirty range
// [synced, written) of the active segment: on Linux msync with MS_SYNC calls
// vfs_fsync_range(file, start, end, datasync=1) (mm/msync.c), so it is an
// fdatasync of that range, including the conversion of the preallocated
// (unwritten) extents it covers. In WriteModeFD it is fdatasync(2).
//
// Sync is safe to call concurrently with Append and with itself: it takes
// the log lock only to snapshot the active segment and its written end
// (bytes below written are complete), then writes back outside the lock;
// concurrent Syncs are serialised by syncMu. Sealed segments were synced by
// their roll. A failed Sync is terminal for the log.
func (l *Log) Sync() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	s := l.mu.segs[len(l.mu.segs)-1]
	s.acquire()
	s.syncing.Store(true) // a roll sealing s meanwhile leaves its file open
	upTo, nextOff := s.written.Load(), s.next
	l.mu.Unlock()
	defer s.release()
	defer l.syncDone(s)

	from := s.synced.Load()
	if upTo > from {
		start := time.Now()
		var err error
		if l.cfg.WriteMode == WriteModeFD {
			err = s.file.SyncData()
		} else {
			err = s.mapping.Sync(from, upTo-from)
		}
		l.stat.syncDur.observe(time.Since(start))
		if err != nil {
			l.stat.syncErrors.Add(1)
			l.mu.Lock()
			err = l.failLocked(fmt.Errorf("sync %s [%d, %d): %w", s.path, from, upTo, err))
			l.mu.Unlock()
			return err
		}
		l.stat.syncs.Add(1)
		advance(&s.synced, upTo)
	}
	advanceU(&l.durable, nextOff)
	return nil
}

// syncDone closes s's file if a roll sealed s while Sync used it.
func (l *Log) syncDone(s *segment) {
	s.syncing.Store(false)
	if s.closeAfterSync.Load() {
		l.mu.Lock()
		_ = s.closeFile()
		l.mu.Unlock()
	}
}

func advance(v *atomic.Int64, to int64) {
	for cur := v.Load(); cur < to && !v.CompareAndSwap(cur, to); cur = v.Load() {
	}
}

func advanceU(v *atomic.Uint64, to uint64) {
	for cur := v.Load(); cur < to && !v.CompareAndSwap(cur, to); cur = v.Load() {
	}
}

// Close releases the log's references to its segments; a segment still
// held by a reader is unmapped when that reader closes. Close does not sync
// (the caller decides durability) and is idempotent.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return nil
	}
	l.mu.closed = true
	l.mu.maps.lru.Init()
	var first error
	for _, s := range l.mu.segs {
		if err := s.release(); err != nil && first == nil {
			first = err
		}
	}
	l.mu.segs = nil
	return first
}

// AllocatedBytes is the disk the log's segment files hold: the sealed
// ones' contents and the active one's preallocation. A Config.Space has
// been asked for all of it but Stats().Recovery.FoundBytes.
func (l *Log) AllocatedBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, s := range l.mu.segs {
		n += s.allocated
	}
	return n
}

// Stats returns a snapshot of the counters.
func (l *Log) Stats() Stats {
	st := Stats{
		Appends: l.stat.appends.Load(), Records: l.stat.records.Load(), Bytes: l.stat.bytes.Load(),
		Rolls: l.stat.rolls.Load(), NoSpace: l.stat.noSpace.Load(), Truncations: l.stat.truncations.Load(), Syncs: l.stat.syncs.Load(), SyncErrors: l.stat.syncErrors.Load(),
		SyncDuration: l.stat.syncDur.snapshot(), RemovedByRetention: l.stat.removed.Load(),
		First: l.First(), Next: l.Next(), Durable: l.Durable(), Recovery: l.recovery,
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st.Segments = len(l.mu.segs)
	for _, s := range l.mu.segs {
		st.RetainedBytes += s.bytes()
	}
	st.Failed = l.mu.failed != nil
	return st
}
