package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

// TestRoutingGoldenValues are the published Felix's frozen routing values:
// the same key lands on the same shard as there.
func TestRoutingGoldenValues(t *testing.T) {
	for _, c := range []struct {
		key     string
		shards  uint32
		routing wire.Routing
		want    uint32
	}{
		{"customer-0", 8, wire.RoutingModulo, 0}, {"customer-4", 8, wire.RoutingModulo, 2},
		{"customer-1", 8, wire.RoutingModulo, 3}, {"customer-6", 8, wire.RoutingModulo, 4},
		{"customer-2", 8, wire.RoutingModulo, 6},
		{"k0", 12, wire.RoutingModulo, 6}, {"k1", 12, wire.RoutingModulo, 10},
		{"", 4, wire.RoutingModulo, 3},
		{"customer-0", 8, wire.RoutingJumpHash, 3}, {"customer-1", 8, wire.RoutingJumpHash, 0},
		{"customer-2", 8, wire.RoutingJumpHash, 5}, {"customer-4", 8, wire.RoutingJumpHash, 2},
		{"customer-6", 8, wire.RoutingJumpHash, 7},
		{"k0", 12, wire.RoutingJumpHash, 3}, {"k1", 12, wire.RoutingJumpHash, 4},
		{"anything", 1, wire.RoutingJumpHash, 0}, {"anything", 0, wire.RoutingModulo, 0},
	} {
		require.Equal(t, c.want, wire.RouteKey([]byte(c.key), c.shards, c.routing), "%q over %d shards, %s", c.key, c.shards, c.routing)
	}
}

// TestJumpHashMovesFewKeys checks the property jump hash is chosen for:
// growing a stream from n to n+1 shards moves only keys to the new shard.
func TestJumpHashMovesFewKeys(t *testing.T) {
	moved := 0
	for i := range 10000 {
		k := []byte{byte(i), byte(i >> 8), 'x'}
		a, b := wire.RouteKey(k, 10, wire.RoutingJumpHash), wire.RouteKey(k, 11, wire.RoutingJumpHash)
		if a != b {
			require.Equal(t, uint32(10), b, "a key moved to an old shard")
			moved++
		}
	}
	require.InDelta(t, 10000/11, moved, 200)
}

func TestParseRouting(t *testing.T) {
	for _, r := range []wire.Routing{wire.RoutingModulo, wire.RoutingJumpHash} {
		got, ok := wire.ParseRouting(r.String())
		require.True(t, ok)
		require.Equal(t, r, got)
	}
	got, ok := wire.ParseRouting("")
	require.True(t, ok)
	require.Equal(t, wire.RoutingModulo, got)
	_, ok = wire.ParseRouting("ring")
	require.False(t, ok)
}
