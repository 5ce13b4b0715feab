package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

// A watch event is the cache record the broker logged for the change, its
// revision the event's offset; a gap report passes through; bytes that are
// not a cache record are a protocol error.
func TestWatchDecodesChanges(t *testing.T) {
	rec := func(r wire.CacheRecord) []byte {
		b, err := wire.AppendCacheRecord(nil, r)
		require.NoError(t, err)
		return b
	}
	w := &Watch{sub: &Subscription{}}
	w.sub.cur = []Event{
		{Offset: 10, HasOffset: true, Payload: rec(wire.CacheRecord{Op: wire.CacheOpPut, Key: []byte("k"), Value: []byte("v"), ExpiresAt: 1_700_000_000_000})},
		{Offset: 11, HasOffset: true, Payload: rec(wire.CacheRecord{Op: wire.CacheOpCounter, Key: []byte("k"), Value: []byte("5")})},
		{Dropped: 3},
		{Offset: 15, HasOffset: true, Payload: rec(wire.CacheRecord{Op: wire.CacheOpDelete, Key: []byte("k")})},
		{Offset: 16, HasOffset: true, Payload: []byte("not a record")},
	}
	for _, want := range []WatchEvent{
		{Op: wire.CacheOpPut, Key: "k", Value: []byte("v"), Revision: 10, ExpiresAt: time.UnixMilli(1_700_000_000_000)},
		{Op: wire.CacheOpCounter, Key: "k", Value: []byte("5"), Revision: 11},
		{Dropped: 3},
		{Op: wire.CacheOpDelete, Key: "k", Revision: 15},
	} {
		ev, err := w.Next(t.Context())
		require.NoError(t, err)
		if len(want.Value) == 0 {
			want.Value = ev.Value // nil or empty: the record's own
		}
		require.Equal(t, want, ev)
	}
	_, err := w.Next(t.Context())
	require.ErrorIs(t, err, ErrProtocol)
}
