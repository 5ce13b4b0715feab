//go:build !linux

package udp

// msgTrunc is MSG_TRUNC on the BSDs and macOS.
const msgTrunc = 0x10

// parseOOB carries the control messages through unchanged (there is no GRO
// to split off this platform, so the datagram is one packet).
func parseOOB(carry, oob []byte) (_ []byte, seg, dropped int) {
	if len(oob) > quicOOBSize {
		return carry, 0, 1
	}
	return append(carry, oob...), 0, 0
}

// gsoSegment is always 0: quic-go never asks for GSO off Linux.
func gsoSegment(oob []byte) int { return 0 }

// stripSegment is never reached off Linux (gsoSegment is 0); it returns oob.
func stripSegment(dst, oob []byte) []byte { return append(dst, oob...) }
