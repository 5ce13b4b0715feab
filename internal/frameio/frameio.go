// Package frameio reads whole Felix wire frames from a byte stream (a QUIC
// stream), for the broker and the client alike. It sits between wire, which
// does no I/O, and the packages that own streams.
package frameio

import (
	"bufio"
	"errors"
	"io"
	"slices"

	"github.com/felixmq/felix/wire"
)

// Reader reads whole wire frames from a QUIC stream.
//
// Lifetime: the payload returned by Next is valid until the following call;
// decoded binary batches alias it.
type Reader struct {
	r       *bufio.Reader
	max     uint32
	hdr     [wire.HeaderLen]byte
	payload []byte
}

// NewReader reads frames of at most max payload bytes from r.
func NewReader(r io.Reader, max uint32) *Reader {
	// A small buffer: it only has to hold headers and small frames, since
	// bufio reads a payload at least this big straight into the caller's
	// slice; and a connection may have a thousand streams, each with one.
	return &Reader{r: bufio.NewReaderSize(r, 4<<10), max: max}
}

// Next returns the next frame. A header error (bad magic, version, unknown
// flags, oversized length) is returned with the header; for unknown flag bits
// the payload has been consumed so the stream can go on, for the others the
// framing is lost and the stream must end.
func (f *Reader) Next() (wire.Header, []byte, error) {
	if _, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
		return wire.Header{}, nil, err
	}
	h, err := wire.ParseHeader(f.hdr[:], f.max)
	var flagsErr *wire.FlagsError
	if err != nil && !errors.As(err, &flagsErr) {
		return h, nil, err
	}
	if rerr := f.readPayload(int(h.Length)); rerr != nil {
		return h, nil, rerr
	}
	return h, f.payload, err
}

// Memory is committed as payload bytes arrive, never as a header announces
// them: a peer could otherwise make the reader allocate max bytes per
// stream by sending headers alone (1,024 streams x 16 MiB each per
// connection with the broker's defaults). What arrives is bounded by QUIC
// flow control, so a connection holds at most about its receive window
// (x2 for the doubling). A buffer grown past keepBytes is let go before
// the next frame, so a stream that once carried a big frame does not keep
// its memory for life.
const (
	firstChunk = 64 << 10
	keepBytes  = 1 << 20
)

func (f *Reader) readPayload(n int) error {
	if cap(f.payload) > keepBytes {
		f.payload = nil
	}
	f.payload = f.payload[:0]
	for len(f.payload) < n {
		start := len(f.payload)
		grow := min(n-start, max(firstChunk, start)) // double at most
		f.payload = slices.Grow(f.payload, grow)[:start+grow]
		if _, err := io.ReadFull(f.r, f.payload[start:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			f.payload = f.payload[:0]
			return err
		}
	}
	return nil
}
