package wire

import "fmt"

// Routing is how a stream maps a routing key to a shard. It is fixed when
// the stream is created: changing it would move keys between shards and
// break their order.
type Routing uint8

const (
	// RoutingModulo: shard = KeyHash(key) mod shards. The default.
	RoutingModulo Routing = iota
	// RoutingJumpHash: Lamping and Veach's jump consistent hash of
	// KeyHash(key): growing a stream moves the fewest keys.
	RoutingJumpHash
)

func (r Routing) String() string {
	switch r {
	case RoutingModulo:
		return "modulo"
	case RoutingJumpHash:
		return "jump_hash"
	}
	return fmt.Sprintf("routing(%d)", uint8(r))
}

// ParseRouting maps "modulo" (or "", the default) and "jump_hash" to a
// Routing.
func ParseRouting(s string) (Routing, bool) {
	switch s {
	case "", "modulo":
		return RoutingModulo, true
	case "jump_hash":
		return RoutingJumpHash, true
	}
	return 0, false
}

// KeyHash is the published Felix's key hash: FNV-1a 64 over the raw key
// bytes (no tenant or stream mixed in), then the SplitMix64 finalizer, so
// that keys differing in their last byte still spread over every shard
// count.
func KeyHash(key []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, c := range key {
		h ^= uint64(c)
		h *= 0x100000001b3
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// RouteKey is the shard of key in a stream of shards shards. A stream of
// at most one shard routes everything to shard 0.
func RouteKey(key []byte, shards uint32, r Routing) uint32 {
	if shards <= 1 {
		return 0
	}
	h := KeyHash(key)
	if r == RoutingJumpHash {
		return jumpHash(h, shards)
	}
	return uint32(h % uint64(shards))
}

// jumpHash is the jump consistent hash in float64 arithmetic, as the paper
// (and the published Felix) computes it; the golden values pin it.
func jumpHash(key uint64, buckets uint32) uint32 {
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return uint32(b)
}
