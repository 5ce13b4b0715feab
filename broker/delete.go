package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/felixmq/felix/segment"
)

// DeleteStream removes a stream while the broker runs: it is unregistered
// (publishes and subscribes get not found), its consumer groups stop, its
// subscriptions end (their event streams are reset), its shards close,
// and a durable stream leaves the catalog and the data directory, shard
// logs and group state, giving its tenant's disk quota back.
func (b *Broker) DeleteStream(k StreamKey) error {
	b.catalogMu.Lock()
	defer b.catalogMu.Unlock()
	st, err := b.streams.lookup(k)
	if err != nil {
		return err
	}
	b.streams.unregister(st)
	st.deleted.Store(true)
	b.groups.closeStream(k)
	var errs []error
	for _, sh := range st.shards {
		sh.endSubscribers()
		errs = append(errs, sh.close())
	}
	if st.spec.Durable {
		errs = append(errs, b.uncatalog(func(c *catalog) {
			c.Streams = slices.DeleteFunc(c.Streams, func(s StreamSpec) bool { return s.StreamKey == k })
		}))
		for i := range st.shards {
			errs = append(errs, os.RemoveAll(b.shardDir(st.spec, i)),
				os.RemoveAll(filepath.Join(b.cfg.DataDir, "queues", segment.ShardDirName(k.Tenant, k.Namespace, k.Stream, uint32(i)))))
		}
	}
	if err := errors.Join(errs...); err != nil {
		b.log.Error("stream deleted, with errors", "stream", k.String(), "err", err)
		return fmt.Errorf("broker: deleting %s: %w", k, err)
	}
	b.log.Info("stream deleted", "stream", k.String(), "shards", len(st.shards), "durable", st.spec.Durable)
	return nil
}

// DeleteCache removes a cache while the broker runs: it is unregistered,
// its watches end, it closes, and a durable cache leaves the catalog and
// the data directory.
func (b *Broker) DeleteCache(k CacheKey) error {
	b.catalogMu.Lock()
	defer b.catalogMu.Unlock()
	c, err := b.caches.lookup(k)
	if err != nil {
		return err
	}
	c.endWatches()
	b.caches.remove(c)
	var errs []error
	if c.spec.Durable {
		errs = append(errs, b.uncatalog(func(cat *catalog) {
			cat.Caches = slices.DeleteFunc(cat.Caches, func(s CacheSpec) bool { return s.CacheKey == k })
		}), os.RemoveAll(filepath.Join(b.cfg.DataDir, "caches", segment.ShardDirName(k.Tenant, k.Namespace, k.Cache, 0))))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("broker: deleting cache %s: %w", k, err)
	}
	b.log.Info("cache deleted", "cache", k.String(), "durable", c.spec.Durable)
	return nil
}

// uncatalog rewrites the catalog with edit applied. The caller holds
// catalogMu.
func (b *Broker) uncatalog(edit func(*catalog)) error {
	c, err := loadCatalog(b.cfg.DataDir)
	if err != nil {
		return err
	}
	edit(&c)
	return saveCatalog(b.cfg.Storage.FS, b.cfg.DataDir, c)
}

func (b *Broker) shardDir(spec StreamSpec, shard int) string {
	return filepath.Join(b.cfg.DataDir, segment.ShardDirName(spec.Tenant, spec.Namespace, spec.Stream, uint32(shard)))
}

// newShardDirs lists the shard directories a creation of spec would make,
// which do not exist yet: what a creation that fails part-way removes.
func (b *Broker) newShardDirs(spec StreamSpec) []string {
	if !spec.Durable || b.cfg.DataDir == "" || spec.Shards > MaxShards {
		return nil
	}
	var dirs []string
	for i := range spec.Shards {
		if d := b.shardDir(spec, i); !exists(d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// unregister removes st from the registry without closing it.
func (r *registry) unregister(st *stream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.streams[st.spec.StreamKey] == st {
		delete(r.mu.streams, st.spec.StreamKey)
	}
}

// endSubscribers ends every subscription following the shard.
func (sh *shard) endSubscribers() {
	sh.mu.Lock()
	subs := sh.mu.subs
	sh.mu.Unlock()
	for _, s := range subs {
		s.end()
	}
}

// closeStream stops and forgets the consumer groups of stream k.
func (gs *groupSet) closeStream(k StreamKey) {
	gs.mu.Lock()
	var closing []*groupShard
	for gk, g := range gs.mu.m {
		if gk.stream == k {
			closing = append(closing, g)
			delete(gs.mu.m, gk)
		}
	}
	gs.mu.Unlock()
	for _, g := range closing {
		g.close()
	}
}

// endWatches ends every watch of the cache.
func (c *cache) endWatches() {
	c.mu.Lock()
	var subs []*subscription
	for _, ws := range c.mu.watchers {
		subs = append(subs, ws...)
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.end()
	}
}
