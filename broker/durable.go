package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/segment"
)

// ErrNoDataDir: a durable stream was requested from a broker without one.
var ErrNoDataDir = errors.New("durable streams need a data directory (FELIX_DATA_DIR)")

// durableLog is a segment log joined to the commit sequencer that makes
// its appends durable per an fsync mode. Durable stream shards and durable
// caches both write through one; segment and commit never import each
// other, the broker joins them here.
type durableLog struct {
	log   *segment.Log
	seq   *commit.Sequencer
	space *logSpace // what the log holds of its tenant's disk (quota.go)
}

// openDurableLog opens (recovering) the log of tenant in dir and starts
// its sequencer. fsync must be a valid commit mode (validated with the
// spec).
func openDurableLog(b *Broker, dir, tenant, fsync string, cfg segment.Config, logger *slog.Logger) (*durableLog, error) {
	cfg.Logger = logger
	space := b.space.forLog(tenant)
	cfg.Space = space
	log, err := segment.Open(dir, cfg)
	if err != nil {
		return nil, err
	}
	space.charge(log.Stats().Recovery.FoundBytes)
	mode, _ := commit.ParseMode(fsync)
	// Post-commit callbacks wait only for a Block subscriber's queue,
	// which a durable log has only when the broker drops for durable
	// subscribers under Block (cache watchers never block).
	inline := !b.cfg.DurableDrops || b.cfg.Queue.Policy != fanout.Block
	seq, err := commit.New(commit.Config{Mode: mode, Interval: b.cfg.FsyncInterval, Syncer: log, Logger: logger,
		InlineCallbacks: inline})
	if err != nil {
		log.Close()
		space.releaseAll()
		return nil, err
	}
	return &durableLog{log: log, seq: seq, space: space}, nil
}

// append appends payloads as one batch and reserves it with the sequencer.
// The caller holds its ordering lock, so reservation order is append order
// (the sequencer requires it) and matches whatever order the caller gives
// its own state. On nil, done runs later on the sequencer's goroutine,
// strictly in append order, once the batch is durable per the fsync mode
// (or with the terminal sync error); on an error done is never called and
// nothing may be acknowledged: a record that reached the log is then never
// acked.
func (d *durableLog) append(payloads [][]byte, done func(base uint64, err error)) (uint64, error) {
	return d.appendMarked(payloads, nil, done)
}

// appendMarked is append with the batch marked as an idempotent producer's
// (mark nil: unmarked).
func (d *durableLog) appendMarked(payloads [][]byte, mark *segment.BatchMark, done func(base uint64, err error)) (uint64, error) {
	return d.appendBatch(&segment.Batch{Payloads: payloads, TS: time.Now().UnixMicro(), Mark: mark}, done)
}

// appendBatch is append for a batch with whatever the log keeps with it
// (a mark, a publisher, headers, its time).
func (d *durableLog) appendBatch(b *segment.Batch, done func(base uint64, err error)) (uint64, error) {
	base, err := d.log.AppendBatch(b)
	if err != nil {
		return 0, err
	}
	end := base + uint64(len(b.Payloads))
	if err := d.seq.Reserve(base, end, func(err error) { done(base, err) }); err != nil {
		return 0, err
	}
	return base, nil
}

// close makes everything appended durable (a final sync in every mode),
// completes what is pending, and closes the log.
func (d *durableLog) close() error {
	err := errors.Join(d.seq.Close(), d.log.Close())
	d.space.releaseAll()
	return err
}

// durable is the storage of one durable shard.
type durable struct {
	*durableLog
	// idem is the shard's producer state, pruned after retention.
	idem *idempotence
}

func openDurable(b *Broker, spec StreamSpec, shard int) (*durable, error) {
	if b.cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: %w", ErrInvalidStream, ErrNoDataDir)
	}
	dir := b.shardDir(spec, shard)
	start := time.Now()
	scfg := b.cfg.Storage
	// A stream the catalog lists had its logs created already (outside
	// cluster mode, where a broker opens only the shards it comes to own):
	// a missing one lost its records, and recreating it empty would reuse
	// their offsets. Only the operator may say so (Config.ResetMissing).
	reset := slices.Contains(b.cfg.ResetMissing, spec.StreamKey)
	scfg.MustExist = b.reopening && b.cfg.NodeID == "" && !reset
	if reset && b.reopening && !exists(dir) {
		b.log.Warn("durable shard directory missing: starting it empty at offset 0 (FELIX_DURABLE_RESET_MISSING)",
			"stream", spec.String(), "shard", shard, "dir", dir)
	}
	dl, err := openDurableLog(b, dir, spec.Tenant, spec.Fsync, scfg, b.log.With("stream", spec.String(), "shard", shard))
	if errors.Is(err, segment.ErrMissing) {
		return nil, fmt.Errorf("%w; the catalog (%s) lists %s, so its records are gone: restore the directory, "+
			"or start the stream empty at offset 0 with FELIX_DURABLE_RESET_MISSING=%s", err, catalogFile, spec.StreamKey, spec.StreamKey)
	}
	if errors.Is(err, segment.ErrCorrupt) {
		b.reportCorruption("storage corruption: the log cannot open", err, "log", shardName(spec.StreamKey, shard))
	}
	if err != nil {
		return nil, err
	}
	rs := dl.log.Stats().Recovery
	b.log.Info("durable shard opened", "stream", spec.String(), "shard", shard, "dir", dir,
		"first", dl.log.First(), "next", dl.log.Next(), "truncated_records", rs.TruncatedRecords, "took", time.Since(start))
	return &durable{durableLog: dl}, nil
}

// publish appends buf's payloads, with meta's headers and publisher, and
// reserves them with the sequencer, both under the shard lock so that
// reservation order is offset order. It owns buf's reference. The append's
// time is stamped on buf (before it is shared), so live delivery reports
// the time a replay reads back.
func (d *durable) publish(sh *shard, buf *fanout.Buffer, payloads [][]byte, meta *batchMeta, hook *appendHook, done func(uint64, error)) {
	sh.mu.Lock()
	batch := &segment.Batch{Payloads: payloads, TS: time.Now().UnixMicro(), Mark: hook.batchMark(),
		Publisher: meta.storedPublisher(), Headers: meta.storedHeaders()}
	buf.Stamp = batch.TS
	base, err := d.appendBatch(batch, func(base uint64, err error) { d.committed(sh, buf, base, err, done) })
	if err == nil {
		hook.appendedLocked(base)
	}
	sh.mu.Unlock()
	if err != nil {
		// Not reserved: the sequencer is closed or the log failed. A record
		// that reached the log here is never acknowledged.
		buf.Release()
		done(0, err)
	}
}

// committed is the post-commit half, on the sequencer's goroutine in offset
// order: deliver to the ring and the subscribers, then acknowledge.
func (d *durable) committed(sh *shard, buf *fanout.Buffer, base uint64, err error, done func(uint64, error)) {
	defer buf.Release()
	if err != nil {
		done(0, err)
		return
	}
	sh.deliverCommitted(buf, base)
	done(base, nil)
}

// enforceRetention removes whole sealed segments past the retention
// bounds, and forgets the producer batches they held.
func (d *durable) enforceRetention(now time.Time) (int, error) {
	n, err := d.log.EnforceRetention(now)
	if n > 0 && d.idem != nil {
		d.idem.forgetBelow(d.log.First())
	}
	return n, err
}

// enforceRetention applies the retention bounds of a durable shard's log
// (its own or its replica's); 0 for a shard without one here.
func (sh *shard) enforceRetention(now time.Time) (int, error) {
	if d := sh.durable(); d != nil {
		return d.enforceRetention(now)
	}
	if r := sh.rep.Load(); r != nil {
		// The floor (SetRetentionFloor) keeps what is not committed yet.
		n, err := r.log.EnforceRetention(now)
		if n > 0 {
			sh.idem.forgetBelow(r.log.First())
		}
		return n, err
	}
	return 0, nil
}

// afterCommitted calls done once everything appended so far is committed
// per the fsync mode (an empty reservation at the tail, behind every
// batch already reserved), or with the sequencer's error.
func (d *durable) afterCommitted(sh *shard, done func(error)) {
	sh.mu.Lock()
	next := d.log.Next()
	err := d.seq.Reserve(next, next, done)
	sh.mu.Unlock()
	if err != nil {
		done(err)
	}
}
