package udp

import "golang.org/x/net/ipv4"

// batch is one recvmmsg worth of datagrams in our own buffers, and a cursor
// over the packets still to hand out. A GRO aggregate is handed out one
// segment per caller message; the segments of one datagram share its
// source address and carried control messages.
//
// A batch has one owner at a time: quic-go's read goroutine (inline), or
// the pinned reader until it hands the batch on, then ReadBatch until it
// returns the batch to the free list.
type batch struct {
	msgs []ipv4.Message
	n    int   // datagrams filled by the last read
	err  error // the read's error (pinned mode), delivered instead of data

	i     int    // current datagram
	off   int    // offset of the next segment in msgs[i]
	seg   int    // segment size of msgs[i]: the GRO size, or its length
	carry []byte // control messages of msgs[i] to copy into every segment
}

func newBatch(size, bufSize int) *batch {
	b := &batch{msgs: make([]ipv4.Message, size), carry: make([]byte, 0, quicOOBSize)}
	for i := range b.msgs {
		b.msgs[i].Buffers = [][]byte{make([]byte, bufSize)}
		b.msgs[i].OOB = make([]byte, oobBufferSize)
	}
	return b
}

func (b *batch) empty() bool { return b.i >= b.n }

// load starts handing out n freshly read datagrams and accounts them.
func (b *batch) load(n int, st *counters) {
	b.n, b.i, b.off, b.err = n, 0, 0, nil
	st.recvCalls.Add(1)
	st.datagramsIn.Add(uint64(n))
	for i := range n {
		if b.msgs[i].Flags&msgTrunc != 0 {
			st.truncated.Add(1)
		}
	}
	b.prepare(st)
}

// prepare parses the current datagram's control messages: its GRO segment
// size and the messages to carry into each segment.
func (b *batch) prepare(st *counters) {
	if b.empty() {
		return
	}
	m := &b.msgs[b.i]
	var seg, dropped int
	b.carry, seg, dropped = parseOOB(b.carry[:0], m.OOB[:m.NN])
	if dropped > 0 {
		st.oobDropped.Add(uint64(dropped))
	}
	if seg <= 0 || seg >= m.N {
		seg = m.N
	} else {
		st.groBatches.Add(1)
	}
	b.seg = seg
}

// deliver copies as many packets as fit into ms (one per message, never
// replacing ms[k].Buffers[0]) and returns how many. It returns at least 1
// unless the batch is empty or ms is.
func (b *batch) deliver(ms []ipv4.Message, st *counters) int {
	k := 0
	for k < len(ms) && !b.empty() {
		m := &b.msgs[b.i]
		data := m.Buffers[0][:m.N]
		end := min(b.off+b.seg, len(data))
		dst := &ms[k]
		dst.N = copy(dst.Buffers[0], data[b.off:end])
		if dst.N < end-b.off {
			st.truncated.Add(1)
		}
		dst.NN = copy(dst.OOB, b.carry)
		if dst.NN < len(b.carry) {
			// Cannot happen with quic-go's 128-byte OOB buffers: parseOOB
			// keeps carry within that. A partial control message would be
			// misparsed, so send none.
			dst.NN = 0
			st.oobDropped.Add(1)
		}
		dst.Addr = m.Addr
		dst.Flags = 0
		k++
		b.off = end
		if b.off >= len(data) {
			b.i++
			b.off = 0
			b.prepare(st)
		}
	}
	st.packetsIn.Add(uint64(k))
	return k
}
