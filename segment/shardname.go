package segment

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
)

// ShardDirName is the directory name of one stream shard's log under the
// broker's data directory, as the published Felix names it:
// {tenant}_{namespace}_{stream}_{shard}-{hash:016x}. Each name component is
// mapped character by character ([A-Za-z0-9-] kept, anything else '_'),
// truncated to 32 characters, and '_' when empty. The hash, FNV-1a-64 over
// the length-prefixed (u64 big-endian length, then bytes) tenant, namespace
// and stream followed by the u32 big-endian shard, keeps names that map to
// the same readable part apart.
func ShardDirName(tenant, namespace, stream string, shard uint32) string {
	h := fnv.New64a()
	var buf [8]byte
	for _, s := range []string{tenant, namespace, stream} {
		binary.BigEndian.PutUint64(buf[:], uint64(len(s)))
		h.Write(buf[:])
		h.Write([]byte(s))
	}
	binary.BigEndian.PutUint32(buf[:4], shard)
	h.Write(buf[:4])
	return fmt.Sprintf("%s_%s_%s_%d-%016x", dirComponent(tenant), dirComponent(namespace),
		dirComponent(stream), shard, h.Sum64())
}

func dirComponent(s string) string {
	var b strings.Builder
	for _, c := range s {
		if b.Len() == 32 {
			break
		}
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}
