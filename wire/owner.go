package wire

import "encoding/binary"

// Owner names the broker that owns a publish's shard: its node (member) id,
// its client-facing QUIC address ("" = absent) and the generation in which
// it owns the shard (our placement version). In a binary ack it is the
// published Felix's 0x0080 block; in JSON answers it is the Felix-Go
// owner_id / owner_addr fields. A hint: a client may route the shard there.
type Owner struct {
	ID         string
	Addr       string
	Generation uint64
}

// size is the owner block's length: u16+id, u16+addr, u64 generation.
func (o *Owner) size() int { return 12 + len(o.ID) + len(o.Addr) }

func (o *Owner) check() error {
	if err := checkName("owner_id", o.ID); err != nil {
		return err
	}
	return checkName("owner_addr", o.Addr)
}

func (o *Owner) appendBinary(dst []byte) []byte {
	dst = appendName(dst, o.ID)
	dst = appendName(dst, o.Addr)
	return binary.BigEndian.AppendUint64(dst, o.Generation)
}

func (o *Owner) decode(r *reader) error {
	if err := r.str("owner_node_id", &o.ID); err != nil {
		return err
	}
	if err := r.str("owner_addr", &o.Addr); err != nil {
		return err
	}
	var err error
	o.Generation, err = r.u64("owner_generation")
	return err
}

// appendOwnerJSON writes `,"shard":N` when shard is set, then
// `,"owner_id":"..","owner_addr":".."` and a non-zero
// `,"owner_generation":N` when o is.
func appendOwnerJSON(dst []byte, shard *uint32, o *Owner) []byte {
	if shard != nil {
		dst = appendUintField(dst, `,"shard":`, uint64(*shard))
	}
	if o == nil {
		return dst
	}
	dst = appendStrField(dst, `,"owner_id":`, o.ID)
	dst = appendStrField(dst, `,"owner_addr":`, o.Addr)
	if o.Generation != 0 {
		dst = appendUintField(dst, `,"owner_generation":`, o.Generation)
	}
	return dst
}

// owner reads the owner fields; absent owner_id means no owner.
func (f *fields) owner() *Owner {
	id := f.optStr("owner_id")
	if id == nil {
		return nil
	}
	o := &Owner{ID: *id}
	if a := f.optStr("owner_addr"); a != nil {
		o.Addr = *a
	}
	if g := f.optU64("owner_generation"); g != nil {
		o.Generation = *g
	}
	return o
}
