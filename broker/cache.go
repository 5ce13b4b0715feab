package broker

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// cache is one registered cache: its store, its log when durable, and the
// watchers of its keys.
//
// Design: every change (put, delete, counter_add, and the LRU evictions a
// put forces, logged as deletes in the same batch) is ordered under mu:
// encoded once as a wire.CacheRecord, appended to the log and reserved with
// the commit sequencer (durable), applied to the store, and handed to the
// key's watchers. The requester's reply waits for the record's sync in
// on_commit mode (the sequencer batches concurrent reservations into one
// sync, so concurrent writers share it). So gets and watchers see a change
// as soon as it is ordered, before it is durable, as a Redis with
// appendfsync always does; what is acknowledged is durable. A failed sync
// is terminal for the log: later changes are refused, and values ordered
// but never synced may have been read (they are gone after a restart).
//
// Rejected alternative: applying changes in the post-commit callback (as
// stream shards deliver). A counter's new sum and a put's evictions must be
// known when the record is written, so the state they are computed from has
// to be the ordered state, not the committed one.
type cache struct {
	b    *Broker
	spec CacheSpec
	d    *durableLog // nil for an ephemeral cache
	mu   struct {
		sync.Mutex
		store    *cacheStore
		rev      uint64 // revision of the next change (the log offset when durable)
		watchers map[string][]*subscription
		recs     [][]byte // staging for one change's encoded records
	}
}

func openCache(b *Broker, spec CacheSpec) (*cache, error) {
	c := &cache{b: b, spec: spec}
	c.mu.store = newCacheStore(spec.MaxEntries, spec.MaxBytes)
	c.mu.watchers = map[string][]*subscription{}
	if !spec.Durable {
		// Versions are revisions: starting them at the clock keeps a
		// version read before a restart from naming a later value.
		c.mu.rev = uint64(time.Now().UnixMicro())
		return c, nil
	}
	if b.cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCache, ErrNoDataDir)
	}
	dir := filepath.Join(b.cfg.DataDir, "caches", segment.ShardDirName(spec.Tenant, spec.Namespace, spec.Cache, 0))
	scfg := b.cfg.Storage
	// Retention would drop live entries: a cache log keeps every record
	// until compaction rewrites it (cache_compact.go).
	scfg.RetentionBytes, scfg.RetentionAge = 0, 0
	if err := c.openLog(dir, scfg); err != nil {
		return nil, err
	}
	return c, nil
}

// openLog opens and rebuilds the cache's log, compacting it first when it
// holds far more records than live entries.
func (c *cache) openLog(dir string, scfg segment.Config) error {
	b, start := c.b, time.Now()
	if err := recoverCompaction(dir); err != nil {
		return fmt.Errorf("cache %s: recovering compaction: %w", c.spec.CacheKey, err)
	}
	for compacted := false; ; compacted = true {
		d, err := openDurableLog(b, dir, c.spec.Tenant, c.spec.Fsync, scfg, b.log.With("cache", c.spec.String()))
		if err != nil {
			return err
		}
		c.d = d
		c.mu.store = newCacheStore(c.spec.MaxEntries, c.spec.MaxBytes)
		if err := c.rebuild(nowMs()); err != nil {
			d.close()
			return err
		}
		records := d.log.Next() - d.log.First()
		if compacted || !needsCompaction(records, len(c.mu.store.entries)) {
			b.log.Info("durable cache opened", "cache", c.spec.String(), "dir", dir, "records", records,
				"entries", len(c.mu.store.entries), "compacted", compacted, "took", time.Since(start))
			return nil
		}
		if err := d.close(); err != nil {
			return err
		}
		if err := c.compactTo(dir, scfg, d.log.Next()); err != nil {
			return fmt.Errorf("cache %s: %w", c.spec.CacheKey, err)
		}
	}
}

func nowMs() uint64 { return uint64(time.Now().UnixMilli()) }

func (c *cache) close() error {
	if c.d == nil {
		return nil
	}
	return c.d.close()
}

// checkKey refuses keys the record format cannot hold.
func checkKey(key string) error {
	if key == "" || len(key) > wire.MaxCacheKeyBytes {
		return cacheErr(wire.CacheErrInvalid, "key must be 1 to %d bytes, got %d", wire.MaxCacheKeyBytes, len(key))
	}
	return nil
}

// put stores value under key; ttl 0 means no expiry. done gets the outcome
// (after the sync in on_commit mode). A non-nil return means done will not
// be called.
func (c *cache) put(key string, value []byte, ttl time.Duration, done func(error)) error {
	expires, now, err := c.checkPut(key, value, ttl)
	if err != nil {
		return err
	}
	c.mu.Lock()
	ack, err := c.changeLocked(c.mu.store.putRecords(key, value, expires), now, done)
	c.mu.Unlock()
	if err == nil {
		ack()
	}
	return err
}

// checkPut refuses a put the record format or the cache's bounds cannot
// take, and returns its expiry (0: none) and the time now.
func (c *cache) checkPut(key string, value []byte, ttl time.Duration) (expires, now uint64, err error) {
	if err := checkKey(key); err != nil {
		return 0, 0, err
	}
	size := int64(len(key) + len(value))
	if len(value) > MaxCacheValueBytes || size > c.spec.MaxBytes {
		return 0, 0, cacheErr(wire.CacheErrValueTooLarge, "value of %d bytes with a key of %d: over the limit (value %d, entry %d bytes)",
			len(value), len(key), MaxCacheValueBytes, c.spec.MaxBytes)
	}
	now = nowMs()
	if ttl > 0 {
		expires = now + uint64(ttl.Milliseconds())
	}
	return expires, now, nil
}

// get returns the live value of key and its version. The slice is never
// written again (a change replaces it), so the caller may read it after
// the lock is gone.
func (c *cache) get(key string) ([]byte, uint64, bool, error) {
	if err := checkKey(key); err != nil {
		return nil, 0, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.mu.store.get(key, nowMs())
	if !ok {
		return nil, 0, false, nil
	}
	return e.value, e.rev, true, nil
}

// delete removes key; done gets whether a live value was there. Deleting
// an absent (or expired) key changes nothing: no record, no revision, no
// watcher event, and the answer is existed=false, so what the writer is
// told and what watchers see agree.
func (c *cache) delete(key string, done func(existed bool, err error)) error {
	if err := checkKey(key); err != nil {
		return err
	}
	now := nowMs()
	c.mu.Lock()
	if _, existed := c.mu.store.get(key, now); !existed {
		c.mu.Unlock()
		done(false, nil)
		return nil
	}
	recs := []wire.CacheRecord{{Op: wire.CacheOpDelete, Key: []byte(key)}}
	ack, err := c.changeLocked(recs, now, func(err error) { done(true, err) })
	c.mu.Unlock()
	if err == nil {
		ack()
	}
	return err
}

// counterAdd adds delta to the counter at key (absent or expired = 0),
// keeping the entry's expiry; done gets the new sum.
func (c *cache) counterAdd(key string, delta int64, done func(sum int64, err error)) error {
	if err := checkKey(key); err != nil {
		return err
	}
	now := nowMs()
	c.mu.Lock()
	ack, err := c.counterAddLocked(key, delta, now, done)
	c.mu.Unlock()
	if err == nil {
		ack()
	}
	return err
}

func (c *cache) counterAddLocked(key string, delta int64, now uint64, done func(int64, error)) (func(), error) {
	sum, recs, err := c.mu.store.counterRecords(key, delta, now)
	if err != nil {
		return nil, err
	}
	return c.changeLocked(recs, now, func(err error) { done(sum, err) })
}

// counterGet reads the counter at key; absent reads 0.
func (c *cache) counterGet(key string) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, _, err := c.mu.store.counter(key, nowMs())
	return n, err
}

// changeLocked orders one change: it encodes recs once, appends them to the
// log and reserves them (durable), applies them to the store and offers
// them to the keys' watchers. It returns the ack to run once mu is
// released: for an ephemeral cache, done(nil); for a durable one done runs
// from the sequencer and the returned ack is a no-op. On error nothing was
// applied and done is never called.
func (c *cache) changeLocked(recs []wire.CacheRecord, now uint64, done func(error)) (func(), error) {
	payloads := c.mu.recs[:0]
	for _, r := range recs {
		p, err := wire.AppendCacheRecord(nil, r)
		if err != nil {
			return nil, cacheErr(wire.CacheErrInvalid, "%v", err)
		}
		payloads = append(payloads, p)
	}
	c.mu.recs = payloads[:0]
	rev := c.mu.rev
	ack := func() {}
	if c.d != nil {
		base, err := c.d.append(payloads, func(_ uint64, err error) { done(err) })
		if err != nil {
			return nil, fmt.Errorf("cache %s: %w", c.spec.CacheKey, err)
		}
		rev = base
	} else {
		ack = func() { done(nil) }
	}
	for i, r := range recs {
		c.mu.store.apply(r, rev+uint64(i), now)
		c.notifyLocked(string(r.Key), payloads[i], rev+uint64(i))
	}
	c.mu.rev = rev + uint64(len(recs))
	clear(payloads)
	return ack, nil
}
