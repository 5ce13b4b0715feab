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
// header: a sender builds whole frames with BeginRaftBatchFrame).
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

// BeginRaftBatchFrame starts a RaftBatch frame at the end of dst, to be
// built in place, each message encoded straight into it: add the messages
// with AppendRaftMessage, then finish it with EndRaftBatchFrame(dst,
// start, count), start being len(dst) before this call.
func BeginRaftBatchFrame(dst []byte) []byte {
	return binary.BigEndian.AppendUint32(AppendHeader(dst, 0, 0), 0)
}

// AppendRaftMessage appends one message of group to a frame begun with
// BeginRaftBatchFrame; marshal appends the message's encoding to the slice
// it is given. On an error dst is as it was.
func AppendRaftMessage(dst []byte, group string, marshal func([]byte) ([]byte, error)) ([]byte, error) {
	if len(group) > 0xFFFF {
		return dst, fmt.Errorf("%w: raft group name of %d bytes", ErrCountTooLarge, len(group))
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(group)))
	dst = append(dst, group...)
	at := len(dst)
	dst, err := marshal(binary.BigEndian.AppendUint32(dst, 0))
	if err != nil {
		return dst[:start], err
	}
	n := uint64(len(dst) - at - 4)
	if n > 0xFFFFFFFF {
		return dst[:start], fmt.Errorf("%w: raft message of %d bytes", ErrCountTooLarge, n)
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(n))
	return dst, nil
}

// EndRaftBatchFrame finishes the frame begun at start in dst, holding
// count messages.
func EndRaftBatchFrame(dst []byte, start, count int) []byte {
	binary.BigEndian.PutUint32(dst[start+8:], uint32(len(dst)-start-HeaderLen))
	binary.BigEndian.PutUint32(dst[start+HeaderLen:], uint32(count))
	return dst
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
