package broker

import (
	"math"
	"slices"
	"strconv"

	"github.com/felixmq/felix/wire"
)

// cacheStore is the in-memory state of one cache: a map of entries and an
// intrusive LRU list, with entry and byte accounting, and the rules that
// turn a request into the records that change it (a put's evictions, a
// counter's new sum), apply a record, rebuild from a log and compact one.
// It is a pure core (no clock, no I/O, no lock): the cache drives it under
// its own lock, passes the time in and logs the records, so tests step it
// without a broker.
//
// Eviction policy (docs/protocol.md, "Cache capacity"): when a put would
// exceed maxEntries or maxBytes (key + value bytes), the least recently used
// entries are evicted, where "used" means put, counter_add, get or a watch's
// current read. An expired entry still counts until it is touched or
// evicted: expiry is lazy, like the published Felix.
type cacheStore struct {
	maxEntries int
	maxBytes   int64

	entries map[string]*cacheEntry
	bytes   int64
	// head is the sentinel of the LRU ring: head.next is the most recently
	// used entry, head.prev the least.
	head cacheEntry
}

type cacheEntry struct {
	key       string
	value     []byte
	expiresAt uint64 // Unix ms; 0 = never
	counter   bool   // last written by counter_add (watch events say so)
	rev       uint64 // revision of the write that produced this value

	prev, next *cacheEntry
}

func (e *cacheEntry) size() int64 { return int64(len(e.key) + len(e.value)) }

func (e *cacheEntry) expired(nowMs uint64) bool { return e.expiresAt != 0 && e.expiresAt <= nowMs }

func newCacheStore(maxEntries int, maxBytes int64) *cacheStore {
	s := &cacheStore{maxEntries: maxEntries, maxBytes: maxBytes, entries: map[string]*cacheEntry{}}
	s.head.next, s.head.prev = &s.head, &s.head
	return s
}

// get returns the live entry for key and marks it used; an expired entry is
// removed and reported absent.
func (s *cacheStore) get(key string, nowMs uint64) (*cacheEntry, bool) {
	e := s.entries[key]
	if e == nil {
		return nil, false
	}
	if e.expired(nowMs) {
		s.remove(e)
		return nil, false
	}
	s.touch(e)
	return e, true
}

// victims lists, least recently used first, the keys a write of size bytes
// to key must evict so that the cache stays within its bounds. The entry
// being replaced is not a victim: its old size is credited instead.
func (s *cacheStore) victims(key string, size int64) []string {
	entries, bytes := len(s.entries)+1, s.bytes+size
	if old := s.entries[key]; old != nil {
		entries, bytes = entries-1, bytes-old.size()
	}
	var out []string
	for e := s.head.prev; e != &s.head && (entries > s.maxEntries || bytes > s.maxBytes); e = e.prev {
		if e.key == key {
			continue
		}
		out = append(out, e.key)
		entries, bytes = entries-1, bytes-e.size()
	}
	return out
}

// set stores value under key as the most recently used entry.
func (s *cacheStore) set(key string, value []byte, expiresAt, rev uint64, counter bool) *cacheEntry {
	e := s.entries[key]
	if e == nil {
		e = &cacheEntry{key: key}
		s.entries[key] = e
		s.link(e)
	} else {
		s.bytes -= e.size()
		s.touch(e)
	}
	e.value, e.expiresAt, e.rev, e.counter = value, expiresAt, rev, counter
	s.bytes += e.size()
	return e
}

// delete removes key and reports whether a live entry was there.
func (s *cacheStore) delete(key string, nowMs uint64) bool {
	e := s.entries[key]
	if e == nil {
		return false
	}
	s.remove(e)
	return !e.expired(nowMs)
}

// trim evicts least recently used entries until the bounds hold; rebuilding
// from a log needs it only if the log holds more than the bounds allow.
func (s *cacheStore) trim() int {
	n := 0
	for len(s.entries) > s.maxEntries || s.bytes > s.maxBytes {
		s.remove(s.head.prev)
		n++
	}
	return n
}

func (s *cacheStore) remove(e *cacheEntry) {
	delete(s.entries, e.key)
	s.bytes -= e.size()
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (s *cacheStore) link(e *cacheEntry) {
	e.prev, e.next = &s.head, s.head.next
	s.head.next.prev = e
	s.head.next = e
}

func (s *cacheStore) touch(e *cacheEntry) {
	if s.head.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	s.link(e)
}

// putRecords is the change a put of value under key makes: the put, then a
// delete of each entry it evicts (logged in the same batch, so a rebuild
// evicts the same ones).
func (s *cacheStore) putRecords(key string, value []byte, expiresAt uint64) []wire.CacheRecord {
	recs := []wire.CacheRecord{{Op: wire.CacheOpPut, ExpiresAt: expiresAt, Key: []byte(key), Value: value}}
	return s.withVictims(recs, key, int64(len(key)+len(value)))
}

func (s *cacheStore) withVictims(recs []wire.CacheRecord, key string, size int64) []wire.CacheRecord {
	for _, v := range s.victims(key, size) {
		recs = append(recs, wire.CacheRecord{Op: wire.CacheOpDelete, Key: []byte(v)})
	}
	return recs
}

// counter reads the counter at key: absent or expired reads 0; a value that
// is not a decimal int64 is refused. It counts as a use of the entry.
func (s *cacheStore) counter(key string, nowMs uint64) (sum int64, expiresAt uint64, err error) {
	e, ok := s.get(key, nowMs)
	if !ok {
		return 0, 0, nil
	}
	n, ok := wire.ParseCounter(e.value)
	if !ok {
		return 0, 0, cacheErr(wire.CacheErrNotCounter, "key %s holds a value that is not a decimal int64", key)
	}
	return n, e.expiresAt, nil
}

// counterRecords is the change a counter_add of delta at key makes, keeping
// the entry's expiry, and the new sum; overflow is refused.
func (s *cacheStore) counterRecords(key string, delta int64, nowMs uint64) (int64, []wire.CacheRecord, error) {
	cur, expires, err := s.counter(key, nowMs)
	if err != nil {
		return 0, nil, err
	}
	if (delta > 0 && cur > math.MaxInt64-delta) || (delta < 0 && cur < math.MinInt64-delta) {
		return 0, nil, cacheErr(wire.CacheErrOverflow, "counter %s: %d + %d overflows int64", key, cur, delta)
	}
	sum := cur + delta
	val := strconv.AppendInt(nil, sum, 10)
	recs := []wire.CacheRecord{{Op: wire.CacheOpCounter, ExpiresAt: expires, Key: []byte(key), Value: val}}
	return sum, s.withVictims(recs, key, int64(len(key)+len(val))), nil
}

// apply applies one record of a change ordered now, at revision rev.
func (s *cacheStore) apply(r wire.CacheRecord, rev, nowMs uint64) {
	key := string(r.Key)
	if r.Op == wire.CacheOpDelete {
		s.delete(key, nowMs)
		return
	}
	s.set(key, r.Value, r.ExpiresAt, rev, r.Op == wire.CacheOpCounter)
}

// replay applies one record read back from the log at offset rev while
// rebuilding: a record that has expired by now is a delete. r.Value may
// alias the log's mapping, so it is copied.
func (s *cacheStore) replay(r wire.CacheRecord, rev, nowMs uint64) {
	key := string(r.Key)
	if r.Op == wire.CacheOpDelete || (r.ExpiresAt != 0 && r.ExpiresAt <= nowMs) {
		s.delete(key, nowMs)
		return
	}
	s.set(key, slices.Clone(r.Value), r.ExpiresAt, rev, r.Op == wire.CacheOpCounter)
}

// liveRecords is the store as a compacted log: one record per entry, least
// recently used first, so that replaying them restores the LRU order.
func (s *cacheStore) liveRecords() []wire.CacheRecord {
	out := make([]wire.CacheRecord, 0, len(s.entries))
	for e := s.head.prev; e != &s.head; e = e.prev {
		rec := wire.CacheRecord{Op: wire.CacheOpPut, ExpiresAt: e.expiresAt, Key: []byte(e.key), Value: e.value}
		if e.counter {
			rec.Op = wire.CacheOpCounter
		}
		out = append(out, rec)
	}
	return out
}
