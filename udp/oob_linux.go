//go:build linux

package udp

import (
	"encoding/binary"

	"github.com/felixmq/felix/internal/linux"
)

// msgTrunc is MSG_TRUNC in recvmsg's flags: the datagram was larger than
// the buffer.
const msgTrunc = 0x20

// parseOOB walks the kernel control messages of one datagram. It returns
// the UDP_GRO segment size (0 if the datagram is not an aggregate), and
// appends to carry, verbatim in kernel layout, every IPPROTO_IP and
// IPPROTO_IPV6 message — IP_TOS / IPV6_TCLASS (ECN) and IP_PKTINFO /
// IPV6_PKTINFO, which quic-go parses — as long as they fit quic-go's
// 128-byte OOB buffer; dropped counts those that did not. The UDP_GRO
// message itself is not carried: it describes the aggregate, not a segment.
//
// Copying the aggregate's TOS/TCLASS into every segment is right because
// GRO does not merge packets whose marks differ (net/ipv4/af_inet.c
// inet_gro_receive flushes on a TOS difference, net/ipv6/ip6_offload.c
// ipv6_gro_receive on a traffic-class difference), and a locally sent GSO
// buffer carries one mark by construction.
func parseOOB(carry, oob []byte) (_ []byte, seg, dropped int) {
	for len(oob) > 0 {
		start := len(oob)
		level, typ, data, rest, err := linux.NextCmsg(oob)
		if err != nil {
			break
		}
		whole := oob[:start-len(rest)]
		oob = rest
		switch {
		case level == linux.SOL_UDP && typ == linux.UDP_GRO && len(data) >= 4:
			seg = int(binary.NativeEndian.Uint32(data))
		case level == linux.IPPROTO_IP || level == linux.IPPROTO_IPV6:
			if len(carry)+len(whole) > quicOOBSize {
				dropped++
				continue
			}
			carry = append(carry, whole...)
		}
	}
	return carry, seg, dropped
}

// gsoSegment returns the UDP_SEGMENT size in a write's control messages,
// or 0 when the write is a single packet.
func gsoSegment(oob []byte) int {
	for len(oob) > 0 {
		level, typ, data, rest, err := linux.NextCmsg(oob)
		if err != nil {
			return 0
		}
		if level == linux.SOL_UDP && typ == linux.UDP_SEGMENT && len(data) >= 2 {
			return int(binary.NativeEndian.Uint16(data))
		}
		oob = rest
	}
	return 0
}

// stripSegment appends to dst every control message of oob except
// UDP_SEGMENT.
func stripSegment(dst, oob []byte) []byte {
	for len(oob) > 0 {
		start := len(oob)
		level, typ, _, rest, err := linux.NextCmsg(oob)
		if err != nil {
			break
		}
		if level != linux.SOL_UDP || typ != linux.UDP_SEGMENT {
			dst = append(dst, oob[:start-len(rest)]...)
		}
		oob = rest
	}
	return dst
}
