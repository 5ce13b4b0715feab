package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
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
