package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/segment"
)

// ErrStorage: a durable log cannot be read past an offset (a record that
// fails its checksums, an offset out of order). Its message leads with the
// typed code storage and names the offset; the broker's log names the file
// and byte.
var ErrStorage = errors.New("storage")

// storageError is what a reader of shard's log that stopped at offset off
// with err tells its client.
type storageError struct {
	what string // "t1/default/jobs shard 0"
	off  uint64
	err  error
}

func (e *storageError) Error() string {
	return fmt.Sprintf("%v: offset %d of %s cannot be read (%s); nothing past it is delivered", ErrStorage, e.off, e.what, kindOf(e.err))
}

func (e *storageError) Unwrap() []error { return []error{ErrStorage, e.err} }

func kindOf(err error) string {
	var ce *segment.CorruptionError
	if errors.As(err, &ce) {
		return string(ce.Kind)
	}
	return "corrupt log"
}

// checkStorage turns a read error of what's log at offset off into a
// storageError when the log is corrupt, after reporting it; any other
// error is returned as it is.
func (b *Broker) checkStorage(what string, off uint64, err error) error {
	if !errors.Is(err, segment.ErrCorrupt) {
		return err
	}
	b.reportCorruption("storage corruption: a record cannot be read", err, "log", what, "offset", off)
	return &storageError{what: what, off: off, err: err}
}

// reportCorruption logs a corrupt log at ERROR with its file and byte
// (rate-limited: every reader of a bad record finds it) and counts it in
// felix_storage_corruptions_total.
func (b *Broker) reportCorruption(msg string, err error, attrs ...any) {
	b.metrics.corruptions.Inc()
	if ok, n := b.storageLog.allow(time.Now()); ok {
		var ce *segment.CorruptionError
		if errors.As(err, &ce) {
			attrs = append(attrs, "file", ce.Path, "byte", ce.Offset, "kind", ce.Kind)
		}
		b.log.Error(msg, append(attrs, "err", err, "lines_suppressed", n)...)
	}
}

func shardName(k StreamKey, shard int) string { return fmt.Sprintf("%s shard %d", k, shard) }
