package broker

import (
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

func keys(s *cacheStore) []string {
	var out []string
	for e := s.head.next; e != &s.head; e = e.next {
		out = append(out, e.key)
	}
	return out
}

// docs/design.md, "Semantics", cache capacity: past max_entries or max_bytes the least
// recently used entries are evicted; a get counts as a use, and replacing a
// key credits its old size instead of evicting it.
func TestCacheStoreLRUVictims(t *testing.T) {
	s := newCacheStore(3, 100)
	for i, k := range []string{"a", "b", "c"} {
		s.set(k, []byte("v"), 0, uint64(i), false)
	}
	require.Equal(t, []string{"c", "b", "a"}, keys(s))
	require.Empty(t, s.victims("b", 2), "replacing an entry evicts nothing")
	require.Equal(t, []string{"a"}, s.victims("d", 2))
	_, ok := s.get("a", 0)
	require.True(t, ok)
	require.Equal(t, []string{"b"}, s.victims("d", 2), "a get makes a recently used")
	require.Equal(t, []string{"b", "c"}, s.victims("d", 97), "bytes bound: 6 held + 97 > 100")
	require.True(t, s.delete("b", 0))
	require.False(t, s.delete("b", 0))
	require.Equal(t, int64(4), s.bytes)
}

func TestCacheStoreExpiryIsLazy(t *testing.T) {
	s := newCacheStore(10, 100)
	s.set("k", []byte("v"), 50, 1, false)
	_, ok := s.get("k", 49)
	require.True(t, ok)
	_, ok = s.get("k", 50)
	require.False(t, ok, "expired at its expiry time")
	require.Empty(t, s.entries, "the expired entry is removed when found")
	s.set("k", []byte("v"), 50, 2, false)
	require.False(t, s.delete("k", 60), "deleting an expired entry reports it absent")
}

func TestCacheStoreTrim(t *testing.T) {
	s := newCacheStore(2, 100)
	for i, k := range []string{"a", "b", "c", "d"} {
		s.set(k, []byte("v"), 0, uint64(i), false)
	}
	require.Equal(t, 2, s.trim())
	require.Equal(t, []string{"d", "c"}, keys(s))
}

// cacheStep is one request to a cache store at a time, and what it must
// answer. Writes are applied as the cache applies them (every record at its
// own revision), and their records are kept as the cache's log would keep
// them.
type cacheStep struct {
	now   uint64 // ms
	op    string // put, get, del, add, counter
	key   string
	value string // put
	ttl   uint64 // put: ms from now; 0 = none
	delta int64  // add

	want      string              // get: the value ("" = absent); add/counter: the sum
	existed   bool                // del
	evicts    []string            // put/add: the keys the change evicts
	err       wire.CacheErrorCode // add/counter: the refusal
	wantOrder []string            // if set: the keys, most recently used first, afterwards
}

// TestCacheStoreTable runs request sequences through the store without a
// broker or a clock, and then restarts each from its log: every record
// encoded and decoded as the log holds it, replayed into a fresh store at
// the last step's time, must give the live entries back in the same LRU
// order (docs/design.md, "Semantics", cache and counter), and so must the
// compacted log (liveRecords) of that store.
func TestCacheStoreTable(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxEntries int
		maxBytes   int64
		steps      []cacheStep
	}{
		{name: "put get delete", maxEntries: 10, maxBytes: 1 << 10, steps: []cacheStep{
			{op: "put", key: "a", value: "1"},
			{op: "get", key: "a", want: "1"},
			{op: "del", key: "a", existed: true},
			{op: "get", key: "a"},
			{op: "del", key: "a", existed: false},
		}},
		{name: "ttl expiry is lazy and exact", maxEntries: 10, maxBytes: 1 << 10, steps: []cacheStep{
			{now: 100, op: "put", key: "k", value: "v", ttl: 50},
			{now: 149, op: "get", key: "k", want: "v"},
			{now: 150, op: "get", key: "k"},
			{now: 160, op: "put", key: "k", value: "w", ttl: 10},
			{now: 170, op: "del", key: "k", existed: false},
			{now: 171, op: "put", key: "keep", value: "x"},
			{now: 172, op: "put", key: "gone", value: "y", ttl: 100},
			// Restarted at 300: "gone" expired meanwhile and is not rebuilt.
			{now: 300, op: "get", key: "keep", want: "x"},
		}},
		{name: "least recently used evicted past max_entries", maxEntries: 3, maxBytes: 1 << 10, steps: []cacheStep{
			{op: "put", key: "a", value: "1"},
			{op: "put", key: "b", value: "1"},
			{op: "put", key: "c", value: "1", wantOrder: []string{"c", "b", "a"}},
			{op: "get", key: "a", want: "1", wantOrder: []string{"a", "c", "b"}},
			{op: "put", key: "d", value: "1", evicts: []string{"b"}, wantOrder: []string{"d", "a", "c"}},
			{op: "put", key: "a", value: "2", wantOrder: []string{"a", "d", "c"}},
		}},
		{name: "max_bytes counts key and value", maxEntries: 100, maxBytes: 10, steps: []cacheStep{
			{op: "put", key: "a", value: "1234"}, // 5 bytes
			{op: "put", key: "b", value: "1234"}, // 10
			{op: "put", key: "c", value: "12345678", evicts: []string{"a", "b"}, wantOrder: []string{"c"}},
			{op: "put", key: "c", value: "123456789", wantOrder: []string{"c"}}, // replacing credits the old size
		}},
		{name: "counters", maxEntries: 10, maxBytes: 1 << 10, steps: []cacheStep{
			{op: "counter", key: "n", want: "0"},
			{op: "add", key: "n", delta: 5, want: "5"},
			{op: "add", key: "n", delta: -7, want: "-2"},
			{op: "counter", key: "n", want: "-2"},
			{op: "put", key: "s", value: "text"},
			{op: "add", key: "s", delta: 1, err: wire.CacheErrNotCounter},
			{op: "add", key: "m", delta: math.MaxInt64, want: strconv.FormatInt(math.MaxInt64, 10)},
			{op: "add", key: "m", delta: 1, err: wire.CacheErrOverflow},
			{op: "counter", key: "m", want: strconv.FormatInt(math.MaxInt64, 10)},
		}},
		{name: "a counter keeps its entry's expiry and evicts", maxEntries: 2, maxBytes: 1 << 10, steps: []cacheStep{
			{now: 0, op: "put", key: "n", value: "1", ttl: 100},
			{now: 10, op: "put", key: "x", value: "v"},
			{now: 20, op: "add", key: "n", delta: 1, want: "2", wantOrder: []string{"n", "x"}},
			{now: 30, op: "add", key: "z", delta: 1, want: "1", evicts: []string{"x"}},
			{now: 100, op: "counter", key: "n", want: "0"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newCacheStore(tc.maxEntries, tc.maxBytes)
			var log [][]byte // the encoded records, at revisions 0, 1, ...
			change := func(recs []wire.CacheRecord, now uint64) []string {
				var evicted []string
				for i, r := range recs {
					p, err := wire.AppendCacheRecord(nil, r)
					require.NoError(t, err)
					log = append(log, p)
					s.apply(r, uint64(len(log)-1), now)
					if i > 0 {
						evicted = append(evicted, string(r.Key))
					}
				}
				return evicted
			}
			var now uint64
			for i, st := range tc.steps {
				now = st.now
				what := fmt.Sprintf("step %d (%s %s)", i, st.op, st.key)
				switch st.op {
				case "put":
					var exp uint64
					if st.ttl > 0 {
						exp = st.now + st.ttl
					}
					require.Equal(t, st.evicts, change(s.putRecords(st.key, []byte(st.value), exp), st.now), what)
				case "get":
					e, ok := s.get(st.key, st.now)
					require.Equal(t, st.want != "", ok, what)
					if ok {
						require.Equal(t, st.want, string(e.value), what)
					}
				case "del":
					_, existed := s.get(st.key, st.now)
					require.Equal(t, st.existed, existed, what)
					change([]wire.CacheRecord{{Op: wire.CacheOpDelete, Key: []byte(st.key)}}, st.now)
				case "add":
					sum, recs, err := s.counterRecords(st.key, st.delta, st.now)
					if st.err != "" {
						require.Equal(t, st.err, cacheErrorCode(err), what)
						continue
					}
					require.NoError(t, err, what)
					require.Equal(t, st.want, strconv.FormatInt(sum, 10), what)
					require.Equal(t, st.evicts, change(recs, st.now), what)
				case "counter":
					sum, _, err := s.counter(st.key, st.now)
					require.NoError(t, err, what)
					require.Equal(t, st.want, strconv.FormatInt(sum, 10), what)
				}
				if st.wantOrder != nil {
					require.Equal(t, st.wantOrder, keys(s), what)
				}
			}

			// Restart: rebuild from the log at the last step's time.
			rebuilt := newCacheStore(tc.maxEntries, tc.maxBytes)
			for rev, p := range log {
				var r wire.CacheRecord
				require.NoError(t, wire.DecodeCacheRecord(p, &r))
				rebuilt.replay(r, uint64(rev), now)
			}
			require.Zero(t, rebuilt.trim(), "the log never holds more than the bounds")
			require.Len(t, rebuilt.entries, len(liveEntries(rebuilt, now)), "a rebuild drops what expired meanwhile")
			require.Equal(t, liveEntries(s, now), liveEntries(rebuilt, now), "rebuilt from the log")

			// Compaction: the live entries as a log, replayed.
			compacted := newCacheStore(tc.maxEntries, tc.maxBytes)
			for rev, r := range rebuilt.liveRecords() {
				compacted.replay(r, uint64(rev), now)
			}
			require.Equal(t, liveEntries(rebuilt, now), liveEntries(compacted, now), "rebuilt from the compacted log")
		})
	}
}

// liveEntries lists the entries not expired at now, most recently used
// first, with what a restart must keep of each.
func liveEntries(s *cacheStore, now uint64) []string {
	var out []string
	for e := s.head.next; e != &s.head; e = e.next {
		if !e.expired(now) {
			out = append(out, fmt.Sprintf("%s=%q exp=%d counter=%v", e.key, e.value, e.expiresAt, e.counter))
		}
	}
	return out
}
