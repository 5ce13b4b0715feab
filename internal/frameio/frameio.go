// Package frameio reads whole Felix wire frames from a byte stream (a QUIC
// stream), for the broker and the client alike. It sits between wire, which
// does no I/O, and the packages that own streams.
package frameio

import (
	"bufio"
	"errors"
	"io"

	"github.com/felixmq/felix/wire"
)

// Budget accounts the bytes Readers hold for frame payloads, so that a
// server can bound them per connection and process-wide.
type Budget interface {
	// Take reserves n more bytes; false refuses them (nothing reserved).
	Take(n int) bool
	// Release returns n bytes taken before.
	Release(n int)
}

// ErrBudget: a frame's payload needed more buffer than the Reader's budget
// allows. The framing is lost: the stream must end.
var ErrBudget = errors.New("frameio: frame buffer budget exhausted")

// Reader reads whole wire frames from a QUIC stream.
//
// A read that fails part-way through a frame keeps what arrived: after an
// error the stream can go on from (a read deadline, which a client sets
// to give up waiting when its context ends), the next Next resumes the
// frame where it stopped.
//
// Lifetime: the payload returned by Next is valid until the following call;
// decoded binary batches alias it.
type Reader struct {
	r       *bufio.Reader
	max     uint32
	budget  Budget
	hdr     [wire.HeaderLen]byte
	payload []byte
	keep    int // a buffer up to this big is kept between frames

	// A frame read part-way: hdrN header bytes so far; once the header is
	// whole (inPayload), its parse (cur, curErr) and len(payload) bytes of
	// the payload.
	hdrN      int
	inPayload bool
	cur       wire.Header
	curErr    error
}

// NewReader reads frames of at most max payload bytes from r.
func NewReader(r io.Reader, max uint32) *Reader {
	// A small buffer: it only has to hold headers and small frames, since
	// bufio reads a payload at least this big straight into the caller's
	// slice; and a connection may have a thousand streams, each with one.
	return &Reader{r: bufio.NewReaderSize(r, 4<<10), max: max, keep: keepBytes}
}

// SetKeep makes the Reader keep a payload buffer of up to n bytes between
// frames (default 1 MiB): a stream that carries big frames all the time
// (a replication stream) then does not allocate and grow a buffer again
// for every frame.
func (f *Reader) SetKeep(n int) { f.keep = n }

// SetMax changes the largest payload accepted from the next header on: a
// server reads an unauthenticated stream with a small limit, and raises
// it once the stream has authenticated.
func (f *Reader) SetMax(max uint32) { f.max = max }

// SetBudget makes the Reader reserve its payload buffer from b; call it
// before the first Next, and Release when done with the Reader.
func (f *Reader) SetBudget(b Budget) { f.budget = b }

// Release lets the payload buffer go, returning it to the budget. The
// Reader may be used again.
func (f *Reader) Release() {
	if f.budget != nil && cap(f.payload) > 0 {
		f.budget.Release(cap(f.payload))
	}
	f.payload = nil
}

// Next returns the next frame. A header error (bad magic, version, unknown
// flags, oversized length) is returned with the header; for unknown flag bits
// the payload has been consumed so the stream can go on, for the others the
// framing is lost and the stream must end. So is it after ErrBudget.
func (f *Reader) Next() (wire.Header, []byte, error) {
	if !f.inPayload {
		n, err := io.ReadFull(f.r, f.hdr[f.hdrN:])
		if f.hdrN += n; err != nil {
			if f.hdrN > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return wire.Header{}, nil, err
		}
		f.hdrN = 0
		h, err := wire.ParseHeader(f.hdr[:], f.max)
		if err != nil && !wire.IsFlagsError(err) {
			return h, nil, err
		}
		if cap(f.payload) > f.keep {
			f.Release()
		}
		f.payload = f.payload[:0]
		f.cur, f.curErr, f.inPayload = h, err, true
	}
	if rerr := f.readPayload(int(f.cur.Length)); rerr != nil {
		return f.cur, nil, rerr
	}
	f.inPayload = false
	return f.cur, f.payload, f.curErr
}

// Memory is committed as payload bytes arrive, never as a header announces
// them: a peer could otherwise make the reader allocate max bytes per
// stream by sending headers alone (1,024 streams x 16 MiB each per
// connection with the broker's defaults). A buffer grown past keepBytes is
// let go before the next frame, so a stream that once carried a big frame
// does not keep its memory for life. What the buffer holds is what QUIC
// flow control let in and the reader took out of the stream (so it no
// longer counts against the window): only a Budget bounds it across
// streams.
const (
	firstChunk = 64 << 10
	keepBytes  = 1 << 20
)

// readPayload reads on until the payload holds n bytes.
func (f *Reader) readPayload(n int) error {
	for len(f.payload) < n {
		start := len(f.payload)
		grow := min(n-start, max(firstChunk, start)) // double at most
		if err := f.grow(start + grow); err != nil {
			return err
		}
		got, err := io.ReadFull(f.r, f.payload[start:start+grow])
		f.payload = f.payload[:start+got]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// grow makes the payload buffer's capacity at least n, within the budget.
func (f *Reader) grow(n int) error {
	old := cap(f.payload)
	if n <= old {
		return nil
	}
	if f.budget != nil && !f.budget.Take(n-old) {
		f.payload = f.payload[:0]
		return ErrBudget
	}
	grown := make([]byte, len(f.payload), n) // exactly n: the budget counts capacity
	copy(grown, f.payload)
	f.payload = grown
	return nil
}
