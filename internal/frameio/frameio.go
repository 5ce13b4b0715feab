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
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), max: max}
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
	f.payload = slices.Grow(f.payload[:0], int(h.Length))[:h.Length]
	if _, rerr := io.ReadFull(f.r, f.payload); rerr != nil {
		if rerr == io.EOF {
			rerr = io.ErrUnexpectedEOF
		}
		return h, nil, rerr
	}
	return h, f.payload, err
}
