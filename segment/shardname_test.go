package segment

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShardDirName(t *testing.T) {
	// The hash, computed independently: FNV-1a-64 over u64-BE-length-prefixed
	// tenant, namespace, stream, then the u32-BE shard.
	ref := func(tn, ns, st string, shard uint32) uint64 {
		var b []byte
		for _, s := range []string{tn, ns, st} {
			b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
			b = append(b, s...)
		}
		b = binary.BigEndian.AppendUint32(b, shard)
		h := fnv.New64a()
		h.Write(b)
		return h.Sum64()
	}
	require.Equal(t, fmt.Sprintf("acme_prod_orders_0-%016x", ref("acme", "prod", "orders", 0)),
		ShardDirName("acme", "prod", "orders", 0))
	// Mapping, truncation and the empty component.
	long := strings.Repeat("x", 40)
	got := ShardDirName("a.b/c", "", long, 7)
	require.Equal(t, fmt.Sprintf("a_b_c___%s_7-%016x", strings.Repeat("x", 32), ref("a.b/c", "", long, 7)), got)
	require.Equal(t, "_-1_", dirComponent("é-1!"), "one '_' per character, not per byte")
	// Names that map to the same readable part differ by the hash.
	require.NotEqual(t, ShardDirName("a.b", "n", "s", 0), ShardDirName("a_b", "n", "s", 0))
	require.NotEqual(t, ShardDirName("ab", "c", "s", 0), ShardDirName("a", "bc", "s", 0))
	require.NotEqual(t, ShardDirName("a", "n", "s", 0), ShardDirName("a", "n", "s", 1))
	// Known vector (FNV-1a-64 of the prefix encoding), pinned.
	require.Equal(t, "t_ns_s_0-"+fmt.Sprintf("%016x", ref("t", "ns", "s", 0)), ShardDirName("t", "ns", "s", 0))
}
