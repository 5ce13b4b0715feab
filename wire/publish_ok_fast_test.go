package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

func TestDecodePublishOKHead(t *testing.T) {
	for _, m := range []*wire.PublishOK{
		{RequestID: 0}, {RequestID: 7, Offset: u64p(42)}, {RequestID: 1<<64 - 1, Offset: u64p(1<<64 - 1), Shard: u32p(1<<32 - 1)},
		{RequestID: 9, Shard: u32p(0)},
	} {
		var h wire.PublishOKHead
		require.True(t, wire.DecodePublishOKHead(m.AppendJSON(nil), &h), "%s", m.AppendJSON(nil))
		requireHeadIs(t, m, h)
	}
	for _, js := range []string{
		`{"type":"publish_ok","request_id":07}`,
		`{"type":"publish_ok","request_id":7.0}`,
		`{"type":"publish_ok","request_id":7,"shard":4294967296}`,
		`{"type":"publish_ok","request_id":18446744073709551616}`,
		`{"type":"publish_ok","request_id":7 }`,
		`{"type":"publish_ok","request_id":7,"shard":1,"offset":2}`,
		`{"type":"publish_ok","request_id":7,"shard":1,"owner_id":"b","owner_addr":""}`,
		`{"type":"publish_ok", "request_id":7}`,
		`{"type":"publish_error","request_id":7,"message":"m"}`,
		`{"type":"publish_ok","request_id":7}x`,
	} {
		var h wire.PublishOKHead
		require.False(t, wire.DecodePublishOKHead([]byte(js), &h), js)
	}
	frame := (&wire.PublishOK{RequestID: 3, Offset: u64p(4), Shard: u32p(5)}).AppendJSON(nil)
	var h wire.PublishOKHead
	require.Zero(t, testing.AllocsPerRun(100, func() { wire.DecodePublishOKHead(frame, &h) }))
}

// requireHeadIs checks that a head decoded by the fast path says what the
// full decoder says.
func requireHeadIs(t *testing.T, m *wire.PublishOK, h wire.PublishOKHead) {
	t.Helper()
	require.Nil(t, m.Owner)
	require.Equal(t, m.RequestID, h.RequestID)
	require.Equal(t, m.Offset != nil, h.HasOffset)
	if m.Offset != nil {
		require.Equal(t, *m.Offset, h.Offset)
	}
	require.Equal(t, m.Shard != nil, h.HasShard)
	if m.Shard != nil {
		require.Equal(t, *m.Shard, h.Shard)
	}
}
