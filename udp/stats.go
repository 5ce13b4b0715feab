package udp

import "sync/atomic"

// Stats is a snapshot of a Conn's counters.
type Stats struct {
	// Receive side.
	RecvCalls   uint64 // recvmmsg (or ReadMsgUDP) calls that returned data
	DatagramsIn uint64 // datagrams the kernel returned (a GRO aggregate is one)
	PacketsIn   uint64 // packets handed to the caller after GRO splitting
	GROBatches  uint64 // datagrams that were GRO aggregates of 2+ packets
	Truncated   uint64 // packets cut to fit the caller's buffer (or ours: MSG_TRUNC)
	OOBDropped  uint64 // control messages that did not fit the caller's OOB buffer
	ReadErrors  uint64 // failed reads, deadlines not counted

	// Send side.
	SendCalls   uint64 // sendmsg calls that succeeded
	PacketsOut  uint64 // packets on the wire (a GSO send counts its segments)
	GSOSends    uint64 // sendmsg calls carrying UDP_SEGMENT
	GSOSplit    uint64 // UDP_SEGMENT writes sent packet by packet because GSO is off
	WriteErrors uint64 // failed sendmsg calls

	// Setup.
	GRO             bool // UDP_GRO is on for this socket
	GSO             bool // GSO is allowed and the kernel knows UDP_SEGMENT
	RecvBufferBytes int  // SO_RCVBUF as read back (Linux reports 2× what was set); 0 if unknown
	SendBufferBytes int  // SO_SNDBUF as read back; 0 if unknown
}

// DatagramsPerCall is the mean number of datagrams per recvmmsg call.
func (s Stats) DatagramsPerCall() float64 { return ratio(s.DatagramsIn, s.RecvCalls) }

// PacketsPerDatagram is the mean number of QUIC packets per received
// datagram: above 1 only with GRO.
func (s Stats) PacketsPerDatagram() float64 { return ratio(s.PacketsIn, s.DatagramsIn) }

// PacketsPerSend is the mean number of packets per sendmsg: above 1 only
// with GSO.
func (s Stats) PacketsPerSend() float64 { return ratio(s.PacketsOut, s.SendCalls) }

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

type counters struct {
	recvCalls, datagramsIn, packetsIn, groBatches, truncated, oobDropped, readErrors atomic.Uint64
	sendCalls, packetsOut, gsoSends, gsoSplit, writeErrors                           atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		RecvCalls:   c.recvCalls.Load(),
		DatagramsIn: c.datagramsIn.Load(),
		PacketsIn:   c.packetsIn.Load(),
		GROBatches:  c.groBatches.Load(),
		Truncated:   c.truncated.Load(),
		OOBDropped:  c.oobDropped.Load(),
		ReadErrors:  c.readErrors.Load(),
		SendCalls:   c.sendCalls.Load(),
		PacketsOut:  c.packetsOut.Load(),
		GSOSends:    c.gsoSends.Load(),
		GSOSplit:    c.gsoSplit.Load(),
		WriteErrors: c.writeErrors.Load(),
	}
}

// sent accounts one sendmsg of n payload bytes with GSO segment size seg
// (0: a single packet).
func (c *counters) sent(n, seg int, err error) {
	if err != nil {
		c.writeErrors.Add(1)
		return
	}
	c.sendCalls.Add(1)
	if seg <= 0 {
		c.packetsOut.Add(1)
		return
	}
	c.gsoSends.Add(1)
	c.packetsOut.Add(uint64((n + seg - 1) / seg))
}
