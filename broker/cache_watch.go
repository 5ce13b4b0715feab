package broker

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/wire"
)

// Keyed watch: each watcher is a subscription (bounded fanout queue, event
// stream, writer goroutine, gap notices) attached to one key of one cache
// instead of a shard. A change is encoded once, as a shared event batch
// frame of one event whose payload is the change's wire.CacheRecord and
// whose offset is the change's revision, and every watcher of the key gets
// a reference to that buffer.

// encodeEvent lays rec out as a one-event shared batch frame with offsets,
// numbered rev, in a pooled buffer holding one reference.
func (c *cache) encodeEvent(rec []byte, rev uint64) (*fanout.Buffer, error) {
	buf := c.b.pool.Get(wire.HeaderLen + 8 + 4 + 4 + len(rec))
	var err error
	buf.B, err = wire.AppendEventBatchFrame(buf.B[:0], wire.EventBatch{
		Shared: true, HasBaseOffset: true, BaseOffset: rev, Payloads: [][]byte{rec},
	})
	if err != nil {
		buf.Release()
		return nil, err
	}
	buf.Events, buf.BaseOffset = 1, rev
	return buf, nil
}

// notifyLocked offers one change of key to the key's watchers, in change
// order (mu is held). Watcher queues never block (see watchQueue), so a
// slow watcher costs its own drops, reported as a gap.
func (c *cache) notifyLocked(key string, rec []byte, rev uint64) {
	ws := c.mu.watchers[key]
	if len(ws) == 0 {
		return
	}
	buf, err := c.encodeEvent(rec, rev)
	if err != nil {
		c.b.log.Error("cache: encoding a watch event", "cache", c.spec.String(), "err", err)
		return
	}
	for _, w := range ws {
		w.offer(buf)
	}
	buf.Release()
}

// watchQueue is the watcher queue configuration: the subscriber queue's
// capacity, but never the Block policy, because changes are offered under
// the cache lock and a writer must not wait for a watcher.
func watchQueue(cfg fanout.Config) fanout.Config {
	if cfg.Policy == fanout.Block {
		cfg.Policy = fanout.DropNew
	}
	return cfg
}

// addWatcher registers sub on key. With current, the key's current state
// (a put or counter record, or a delete record when absent) is placed as
// the subscription's replay, numbered with its revision. The snapshot and
// the registration happen under the lock every change takes, so the
// watcher sees the current state and then exactly the later changes: no
// gap, no duplicate. A subscription already ended (its connection closed
// meanwhile) is refused: its detach may have run before this registration.
func (c *cache) addWatcher(sub *subscription, key string, current bool) error {
	if err := checkKey(key); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := sub.ctx.Err(); err != nil {
		return cacheErr(wire.CacheErrUnavailable, "watch ended: %v", err)
	}
	if current {
		buf, err := c.snapshotLocked(key)
		if err != nil {
			return err
		}
		sub.replay, sub.replayFrom = []*fanout.Buffer{buf}, buf.BaseOffset
	}
	c.mu.watchers[key] = append(c.mu.watchers[key], sub)
	return nil
}

func (c *cache) snapshotLocked(key string) (*fanout.Buffer, error) {
	rec := wire.CacheRecord{Op: wire.CacheOpDelete, Key: []byte(key)}
	// An absent key is numbered with the last revision: every later change
	// has a higher one.
	rev := c.mu.rev - 1
	if c.mu.rev == 0 {
		rev = 0
	}
	if e, ok := c.mu.store.get(key, nowMs()); ok {
		rec = wire.CacheRecord{Op: wire.CacheOpPut, ExpiresAt: e.expiresAt, Key: []byte(key), Value: e.value}
		if e.counter {
			rec.Op = wire.CacheOpCounter
		}
		rev = e.rev
	}
	p, err := wire.AppendCacheRecord(nil, rec)
	if err != nil {
		return nil, err
	}
	return c.encodeEvent(p, rev)
}

func (c *cache) removeWatcher(sub *subscription, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := c.mu.watchers[key]
	if i := slices.Index(ws, sub); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
	}
	if len(ws) == 0 {
		delete(c.mu.watchers, key)
		return
	}
	c.mu.watchers[key] = ws
}

// rebuild replays the log into the store: puts and counters set (values
// are copied out of the mapping), deletes (including logged evictions)
// remove, and whatever has expired by now is dropped. Revisions continue
// from the log's next offset. A record that does not decode is corruption
// the segment checksums did not catch (a bug or a foreign log): refused,
// never skipped.
func (c *cache) rebuild(now uint64) error {
	l := c.d.log
	r, err := l.NewReader(l.First())
	if err != nil {
		return err
	}
	defer r.Close()
	var rec wire.CacheRecord
	for {
		sr, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := wire.DecodeCacheRecord(sr.Payload, &rec); err != nil {
			return fmt.Errorf("%s offset %d: %w", l.Dir(), sr.Offset, err)
		}
		c.mu.store.replay(rec, sr.Offset, now)
	}
	if n := c.mu.store.trim(); n > 0 {
		c.b.log.Warn("cache: log holds more than the bounds allow; evicted", "cache", c.spec.String(), "entries", n)
	}
	c.mu.rev = l.Next()
	return nil
}
