package broker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/wire"
)

var (
	// ErrCacheNotFound: the tenant/namespace/cache is not registered.
	ErrCacheNotFound = errors.New("cache not found")
	// ErrCacheExists: a cache with that name is already registered.
	ErrCacheExists = errors.New("cache already exists")
	// ErrInvalidCache: a cache spec that cannot be registered.
	ErrInvalidCache = errors.New("invalid cache")
)

// Cache bounds. A cache spec's zero limits mean the defaults; a value is
// refused when it is over MaxCacheValueBytes or, with its key, over the
// cache's max_bytes (it could never fit).
const (
	DefaultCacheMaxEntries = 1 << 20
	DefaultCacheMaxBytes   = 256 << 20
	MaxCacheValueBytes     = 1 << 20
)

// CacheKey names a cache.
type CacheKey struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
}

func (k CacheKey) String() string { return k.Tenant + "/" + k.Namespace + "/" + k.Cache }

// CacheSpec is what registering a cache takes (POST /v1/caches).
type CacheSpec struct {
	CacheKey
	// Durable caches write every put, delete and counter change through a
	// log under Config.DataDir and are rebuilt from it on restart;
	// ephemeral ones live in memory only.
	Durable bool `json:"durable,omitempty"`
	// Fsync is the durable cache's commit mode, as for streams:
	// "on_commit", "periodic" (default) or "never".
	Fsync string `json:"fsync,omitempty"`
	// MaxEntries and MaxBytes (key + value bytes) bound the cache; past
	// them the least recently used entries are evicted. 0 = the defaults.
	MaxEntries int   `json:"max_entries,omitempty"`
	MaxBytes   int64 `json:"max_bytes,omitempty"`
}

func (s *CacheSpec) withDefaults() {
	if s.Durable && s.Fsync == "" {
		s.Fsync = commit.Periodic.String()
	}
	if s.MaxEntries == 0 {
		s.MaxEntries = DefaultCacheMaxEntries
	}
	if s.MaxBytes == 0 {
		s.MaxBytes = DefaultCacheMaxBytes
	}
}

func (s CacheSpec) validate() error {
	for _, f := range []struct{ name, v string }{{"tenant", s.Tenant}, {"namespace", s.Namespace}, {"cache", s.Cache}} {
		if f.v == "" {
			return fmt.Errorf("%w: %s is empty", ErrInvalidCache, f.name)
		}
		if len(f.v) > 255 || !utf8.ValidString(f.v) || strings.ContainsAny(f.v, "/\x00") {
			return fmt.Errorf("%w: %s %q must be valid UTF-8, at most 255 bytes, without '/'", ErrInvalidCache, f.name, f.v)
		}
	}
	if s.MaxEntries < 1 || s.MaxBytes < 1 {
		return fmt.Errorf("%w: max_entries %d and max_bytes %d must be positive", ErrInvalidCache, s.MaxEntries, s.MaxBytes)
	}
	if !s.Durable && s.Fsync != "" {
		return fmt.Errorf("%w: fsync %q applies to durable caches only", ErrInvalidCache, s.Fsync)
	}
	if s.Durable {
		if _, err := commit.ParseMode(s.Fsync); err != nil {
			return fmt.Errorf("%w: fsync %q: want on_commit, periodic or never", ErrInvalidCache, s.Fsync)
		}
	}
	return nil
}

// cacheRegistry holds the caches of this broker.
type cacheRegistry struct {
	mu struct {
		sync.RWMutex
		caches map[CacheKey]*cache
	}
}

func newCacheRegistry() *cacheRegistry {
	r := &cacheRegistry{}
	r.mu.caches = map[CacheKey]*cache{}
	return r
}

// create opens (rebuilding a durable one from its log) and registers a
// cache.
// create opens a new cache and then serves it, once record (nil: nothing
// to do) succeeded, as registry.create does for streams: a durable cache
// is in the catalog before a change to it can be acked. The caller
// serialises creations (Broker.catalogMu).
func (r *cacheRegistry) create(b *Broker, spec CacheSpec, record func(*cache) error) (*cache, error) {
	spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if _, err := r.lookup(spec.CacheKey); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrCacheExists, spec.CacheKey)
	}
	c, err := openCache(b, spec)
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", spec.CacheKey, err)
	}
	if record != nil {
		if err := record(c); err != nil {
			c.close()
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.caches[spec.CacheKey] = c
	return c, nil
}

func (r *cacheRegistry) remove(c *cache) {
	r.mu.Lock()
	delete(r.mu.caches, c.spec.CacheKey)
	r.mu.Unlock()
	c.close()
}

func (r *cacheRegistry) lookup(k CacheKey) (*cache, error) {
	r.mu.RLock()
	c := r.mu.caches[k]
	r.mu.RUnlock()
	if c == nil {
		return nil, &cacheError{code: wire.CacheErrNotFound, err: fmt.Errorf("%w: %s", ErrCacheNotFound, k)}
	}
	return c, nil
}

func (r *cacheRegistry) list() []*cache {
	r.mu.RLock()
	out := make([]*cache, 0, len(r.mu.caches))
	for _, c := range r.mu.caches {
		out = append(out, c)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *cache) int { return strings.Compare(a.spec.String(), b.spec.String()) })
	return out
}

// cacheError is a refused cache request with its wire error code.
type cacheError struct {
	code wire.CacheErrorCode
	err  error
}

func (e *cacheError) Error() string { return e.err.Error() }
func (e *cacheError) Unwrap() error { return e.err }

func cacheErr(code wire.CacheErrorCode, format string, args ...any) error {
	return &cacheError{code: code, err: fmt.Errorf(format, args...)}
}

// cacheErrorCode classifies err for cache_error; anything unclassified (a
// failed log, a closed sequencer) is unavailable.
func cacheErrorCode(err error) wire.CacheErrorCode {
	var ce *cacheError
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, ErrForbidden):
		return wire.CacheErrForbidden
	}
	return wire.CacheErrUnavailable
}

// CreateCache registers a cache (ErrCacheExists, ErrInvalidCache). A
// durable cache opens (or rebuilds from) its log and is recorded in the
// data directory's catalog, so a restarted broker reopens it.
func (b *Broker) CreateCache(spec CacheSpec) error {
	b.catalogMu.Lock()
	defer b.catalogMu.Unlock()
	c, err := b.caches.create(b, spec, func(c *cache) error {
		if !c.spec.Durable {
			return nil
		}
		cat, err := loadCatalog(b.cfg.DataDir)
		if err == nil {
			cat.Caches = append(cat.Caches, c.spec)
			err = saveCatalog(b.cfg.Storage.FS, b.cfg.DataDir, cat)
		}
		if err != nil {
			return fmt.Errorf("broker: recording durable cache %s: %w", spec.CacheKey, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.log.Info("cache created", "cache", c.spec.String(), "durable", c.spec.Durable, "fsync", c.spec.Fsync,
		"max_entries", c.spec.MaxEntries, "max_bytes", c.spec.MaxBytes)
	return nil
}

// Caches lists the registered caches.
func (b *Broker) Caches() []CacheSpec {
	var out []CacheSpec
	for _, c := range b.caches.list() {
		out = append(out, c.spec)
	}
	return out
}

// CacheStats describes one cache for /debug/felix/stats.
type CacheStats struct {
	CacheSpec
	Entries  int    `json:"entries"`
	Bytes    int64  `json:"bytes"`
	Watchers int    `json:"watchers"`
	Revision uint64 `json:"revision"`
	// LogRecords is how many records a durable cache's log holds (it is
	// compacted on open when far above Entries).
	LogRecords uint64 `json:"log_records,omitempty"`
	// Commit is the group-commit account of a durable cache.
	Commit *CommitStats `json:"commit,omitempty"`
}

func (c *cache) stats() CacheStats {
	c.mu.Lock()
	cs := CacheStats{CacheSpec: c.spec, Entries: len(c.mu.store.entries), Bytes: c.mu.store.bytes, Revision: c.mu.rev}
	for _, ws := range c.mu.watchers {
		cs.Watchers += len(ws)
	}
	c.mu.Unlock()
	if c.d != nil {
		cs.Commit = commitStats(c.d.seq.Stats())
		cs.LogRecords = c.d.log.Next() - c.d.log.First()
	}
	return cs
}
