package wire

import (
	"encoding/binary"
	"fmt"
)

// A RaftBatch frame (flags 0, on a stream whose auth advertised CapRaft)
// carries raft messages from one broker to the replicas on another,
// batched per broker pair:
//
//	u32 count
//	count × { u16 group length, group (UTF-8: "tenant/namespace/stream#shard"),
//	          u32 message length, message (raftpb.Message, protobuf) }
//
// The messages are opaque here: the replica package encodes and decodes
// them.
type RaftMessage struct {
	Group   string
	Message []byte
}

// raftCountLimit bounds a batch's count before anything is allocated: each
// message takes at least 6 bytes of framing.
const raftMinEntry = 2 + 4

// AppendRaftBatch appends the frame payload of msgs to dst (no frame
// header: see AppendRaftBatchFrame).
func AppendRaftBatch(dst []byte, msgs []RaftMessage) ([]byte, error) {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(msgs)))
	for _, m := range msgs {
		if len(m.Group) > 0xFFFF {
			return dst, fmt.Errorf("%w: raft group name of %d bytes", ErrCountTooLarge, len(m.Group))
		}
		if uint64(len(m.Message)) > 0xFFFFFFFF {
			return dst, fmt.Errorf("%w: raft message of %d bytes", ErrCountTooLarge, len(m.Message))
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(m.Group)))
		dst = append(dst, m.Group...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Message)))
		dst = append(dst, m.Message...)
	}
	return dst, nil
}

// AppendRaftBatchFrame appends a whole frame (header and payload).
func AppendRaftBatchFrame(dst []byte, msgs []RaftMessage) ([]byte, error) {
	start := len(dst)
	dst = AppendHeader(dst, 0, 0)
	dst, err := AppendRaftBatch(dst, msgs)
	if err != nil {
		return dst[:start], err
	}
	binary.BigEndian.PutUint32(dst[start+8:], uint32(len(dst)-start-HeaderLen))
	return dst, nil
}

// DecodeRaftBatch decodes a RaftBatch payload into dst (reused), checking
// every length against what remains before slicing. Group names and
// messages alias b.
func DecodeRaftBatch(b []byte, dst []RaftMessage) ([]RaftMessage, error) {
	dst = dst[:0]
	if len(b) < 4 {
		return dst, fmt.Errorf("%w: raft batch count", ErrTruncated)
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n)*raftMinEntry > uint64(len(b)) {
		return dst, fmt.Errorf("%w: %d raft messages in %d bytes", ErrCountTooLarge, n, len(b))
	}
	for range n {
		if len(b) < 2 {
			return dst, fmt.Errorf("%w: raft group length", ErrTruncated)
		}
		gl := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		if len(b) < gl+4 {
			return dst, fmt.Errorf("%w: raft group", ErrTruncated)
		}
		group := string(b[:gl])
		ml := binary.BigEndian.Uint32(b[gl:])
		b = b[gl+4:]
		if uint64(ml) > uint64(len(b)) {
			return dst, fmt.Errorf("%w: raft message of %d bytes, %d left", ErrTruncated, ml, len(b))
		}
		dst = append(dst, RaftMessage{Group: group, Message: b[:ml:ml]})
		b = b[ml:]
	}
	if len(b) != 0 {
		return dst, fmt.Errorf("%w: %d bytes after the raft batch", ErrTrailingBytes, len(b))
	}
	return dst, nil
}
