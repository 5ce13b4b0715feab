package wire

import (
	"encoding/binary"
	"slices"
)

// Cluster additions (Felix-Go, docs/protocol.md "Cluster"): acks that name
// the shard's owner, and publishes addressed to one shard. Both are frame
// modifiers a sender uses only with a peer that advertised the bit, so
// without them every frame is byte-identical to wire v1.

// Owner names the broker that owns a publish's shard: its member id and
// QUIC address (cluster.Member), and the shard the publish went to.
type Owner struct {
	Shard uint32
	ID    string
	Addr  string
}

// ownerSize is the owner trailer's length: u32 shard, u16+id, u16+addr.
func (o *Owner) size() int { return 8 + len(o.ID) + len(o.Addr) }

func (o *Owner) check() error {
	if err := checkName("owner_id", o.ID); err != nil {
		return err
	}
	return checkName("owner_addr", o.Addr)
}

func (o *Owner) appendBinary(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, o.Shard)
	dst = appendName(dst, o.ID)
	return appendName(dst, o.Addr)
}

func (o *Owner) decode(r *reader) error {
	var err error
	if o.Shard, err = r.u32("owner_shard"); err != nil {
		return err
	}
	if err := r.str("owner_id", &o.ID); err != nil {
		return err
	}
	return r.str("owner_addr", &o.Addr)
}

// appendOwnerJSON writes `,"shard":N,"owner_id":"..","owner_addr":".."`,
// nothing for nil.
func appendOwnerJSON(dst []byte, o *Owner) []byte {
	if o == nil {
		return dst
	}
	dst = appendUintField(dst, `,"shard":`, uint64(o.Shard))
	dst = appendStrField(dst, `,"owner_id":`, o.ID)
	return appendStrField(dst, `,"owner_addr":`, o.Addr)
}

// owner reads the owner fields; absent owner_id means no owner.
func (f *fields) owner() *Owner {
	id := f.optStr("owner_id")
	if id == nil {
		return nil
	}
	o := &Owner{ID: *id}
	if s := f.optU32("shard"); s != nil {
		o.Shard = *s
	}
	if a := f.optStr("owner_addr"); a != nil {
		o.Addr = *a
	}
	return o
}

// AppendShardPublishBatchFrame appends a fire-and-forget binary publish
// addressed to one shard (flags 0x0801): u32 shard, then the 0x0001 body.
func AppendShardPublishBatchFrame(dst []byte, shard uint32, tenant, ns, stream string, payloads [][]byte) ([]byte, error) {
	if err := checkPublishBody(tenant, ns, stream, payloads); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, HeaderLen+4+publishBodySize(tenant, ns, stream, payloads))
	dst, start := beginFrame(dst, FlagBinaryPublishBatch|FlagPublishShard)
	dst = binary.BigEndian.AppendUint32(dst, shard)
	dst = appendPublishBody(dst, tenant, ns, stream, payloads)
	return endFrame(dst, start)
}

// AppendShardAckedPublishFrame appends an acked binary publish addressed to
// one shard (flags 0x0809): u64 request_id, u8 ack_mode, u32 shard, then
// the 0x0001 body. The request id stays first so that a malformed body can
// still be answered.
func AppendShardAckedPublishFrame(dst []byte, requestID uint64, mode AckMode, shard uint32, tenant, ns, stream string, payloads [][]byte) ([]byte, error) {
	if mode != AckPerMessage && mode != AckPerBatch {
		return dst, &ValueError{Field: "ack_mode", Value: mode.String(), Err: ErrBadAckMode}
	}
	if err := checkPublishBody(tenant, ns, stream, payloads); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, HeaderLen+13+publishBodySize(tenant, ns, stream, payloads))
	dst, start := beginFrame(dst, FlagBinaryPublishBatch|FlagBinaryPublishAcked|FlagPublishShard)
	dst = binary.BigEndian.AppendUint64(dst, requestID)
	dst = append(dst, byte(mode))
	dst = binary.BigEndian.AppendUint32(dst, shard)
	dst = appendPublishBody(dst, tenant, ns, stream, payloads)
	return endFrame(dst, start)
}

// DecodePublishBatchFlags decodes a 0x0001 or 0x0801 body as flags says;
// into.HasShard tells which.
func DecodePublishBatchFlags(flags Flags, payload []byte, into *PublishBatch) error {
	r := reader{b: payload}
	if err := decodeShard(&r, flags, into); err != nil {
		return err
	}
	if err := decodePublishBody(&r, into); err != nil {
		return err
	}
	return r.end()
}

// DecodeAckedPublishFlags decodes a 0x0009 or 0x0809 body as flags says.
func DecodeAckedPublishFlags(flags Flags, payload []byte, into *AckedPublish) error {
	r := reader{b: payload}
	if err := decodeAckedPrefix(&r, into); err != nil {
		return err
	}
	if err := decodeShard(&r, flags, &into.PublishBatch); err != nil {
		return err
	}
	if err := decodePublishBody(&r, &into.PublishBatch); err != nil {
		return err
	}
	return r.end()
}

func decodeShard(r *reader, flags Flags, into *PublishBatch) error {
	into.Shard, into.HasShard = 0, flags&FlagPublishShard != 0
	if !into.HasShard {
		return nil
	}
	var err error
	into.Shard, err = r.u32("shard")
	return err
}
