package broker

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/segment"
)

// ErrNoDataDir: a durable stream was requested from a broker without one.
var ErrNoDataDir = errors.New("durable streams need a data directory (FELIX_DATA_DIR)")

// durable is the storage of one durable shard: its segment log and the
// commit sequencer that makes appends durable per the stream's fsync mode.
// The broker joins the two: segment and commit never import each other.
type durable struct {
	log *segment.Log
	seq *commit.Sequencer
}

func openDurable(b *Broker, spec StreamSpec, shard int) (*durable, error) {
	if b.cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: %w", ErrInvalidStream, ErrNoDataDir)
	}
	dir := filepath.Join(b.cfg.DataDir, segment.ShardDirName(spec.Tenant, spec.Namespace, spec.Stream, uint32(shard)))
	cfg := b.cfg.Storage
	cfg.Logger = b.log.With("stream", spec.String(), "shard", shard)
	start := time.Now()
	log, err := segment.Open(dir, cfg)
	if err != nil {
		return nil, err
	}
	rs := log.Stats().Recovery
	b.log.Info("durable shard opened", "stream", spec.String(), "shard", shard, "dir", dir,
		"first", log.First(), "next", log.Next(), "truncated_records", rs.TruncatedRecords, "took", time.Since(start))
	mode, _ := commit.ParseMode(spec.Fsync) // validated with the spec
	seq, err := commit.New(commit.Config{Mode: mode, Interval: b.cfg.FsyncInterval, Syncer: log, Logger: cfg.Logger})
	if err != nil {
		log.Close()
		return nil, err
	}
	return &durable{log: log, seq: seq}, nil
}

// publish appends buf's payloads and reserves them with the sequencer, both
// under the shard lock so that reservation order is offset order. It owns
// buf's reference.
func (d *durable) publish(sh *shard, buf *fanout.Buffer, payloads [][]byte, done func(uint64, error)) {
	sh.mu.Lock()
	base, err := d.log.Append(payloads, time.Now().UnixMicro())
	if err == nil {
		end := base + uint64(len(payloads))
		err = d.seq.Reserve(base, end, func(err error) { d.committed(sh, buf, base, err, done) })
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
	sh.mu.Lock()
	sh.deliverLocked(buf, base)
	sh.mu.Unlock()
	done(base, nil)
}

// close makes everything appended durable (a final sync in every mode),
// completes what is pending, and closes the log.
func (d *durable) close() error {
	return errors.Join(d.seq.Close(), d.log.Close())
}

// enforceRetention removes whole sealed segments past the retention bounds.
func (d *durable) enforceRetention(now time.Time) (int, error) {
	return d.log.EnforceRetention(now)
}
