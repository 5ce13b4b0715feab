package wire

import "bytes"

// PublishOKHead is what DecodePublishOKHead reads: publish_ok's request id
// and its optional offset and shard.
type PublishOKHead struct {
	RequestID uint64
	Offset    uint64
	HasOffset bool
	Shard     uint32
	HasShard  bool
}

var publishOKPrefix = []byte(`{"type":"publish_ok","request_id":`)

// DecodePublishOKHead decodes payload when it is publish_ok written exactly
// as AppendJSON writes one without an owner:
// {"type":"publish_ok","request_id":N[,"offset":N][,"shard":N]}. It
// reports false for anything else (another message, other spellings, an
// owner), which DecodeJSON then decodes; when it reports true the fields
// are what DecodeJSON would give. It allocates nothing: an idempotent
// producer's every answer is a publish_ok, and decoding it is on the path
// of every acknowledgement.
func DecodePublishOKHead(payload []byte, into *PublishOKHead) bool {
	rest, ok := bytes.CutPrefix(payload, publishOKPrefix)
	if !ok {
		return false
	}
	*into = PublishOKHead{}
	if into.RequestID, rest, ok = canonicalUint(rest, 64); !ok {
		return false
	}
	if r, found := bytes.CutPrefix(rest, []byte(`,"offset":`)); found {
		if into.Offset, rest, ok = canonicalUint(r, 64); !ok {
			return false
		}
		into.HasOffset = true
	}
	if r, found := bytes.CutPrefix(rest, []byte(`,"shard":`)); found {
		var s uint64
		if s, rest, ok = canonicalUint(r, 32); !ok {
			return false
		}
		into.Shard, into.HasShard = uint32(s), true
	}
	return len(rest) == 1 && rest[0] == '}'
}

// canonicalUint reads the decimal digits at the start of b as JSON writes
// an unsigned integer of bits (no sign, no leading zero, no fraction), and
// returns the rest.
func canonicalUint(b []byte, bits uint) (uint64, []byte, bool) {
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && b[0] == '0') || (n < len(b) && (b[n] == '.' || b[n] == 'e' || b[n] == 'E')) {
		return 0, nil, false
	}
	v, ok := plainUint(b[:n], bits)
	return v, b[n:], ok
}
