package frameio

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

// A header announcing 16 MiB followed by 100 bytes must not make the reader
// commit 16 MiB: memory follows the bytes that arrive.
func TestAnnouncedLengthIsNotAllocatedUpFront(t *testing.T) {
	hdr := wire.AppendJSONFrame(nil, &wire.OK{})[:wire.HeaderLen]
	hdr[8], hdr[9], hdr[10], hdr[11] = 0x01, 0x00, 0x00, 0x00 // length 16 MiB, big-endian
	r := NewReader(io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(make([]byte, 100))), 16<<20)
	_, _, err := r.Next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.LessOrEqual(t, cap(r.payload), 2*firstChunk)
}

// Frames of every size round-trip, and a big frame's buffer is let go.
func TestFramesOfEverySize(t *testing.T) {
	var stream []byte
	sizes := []int{0, 1, firstChunk - 1, firstChunk, firstChunk + 1, 3 << 20, 10}
	for _, n := range sizes {
		p := bytes.Repeat([]byte{byte(n)}, n)
		stream = wire.AppendJSONFrame(stream, &wire.Publish{TenantID: "t", Namespace: "n", Stream: "s", Payload: p})
	}
	r := NewReader(bytes.NewReader(stream), 16<<20)
	for i := range sizes {
		h, payload, err := r.Next()
		require.NoError(t, err, "frame %d", i)
		m, err := wire.DecodeJSON(payload)
		require.NoError(t, err)
		require.Len(t, m.(*wire.Publish).Payload, sizes[i])
		require.EqualValues(t, len(payload), h.Length)
	}
	_, _, err := r.Next()
	require.ErrorIs(t, err, io.EOF)
	require.LessOrEqual(t, cap(r.payload), keepBytes, "the 3 MiB buffer was let go")
}

// countBudget is a Budget with a limit, counting what it holds.
type countBudget struct{ used, limit int }

func (b *countBudget) Take(n int) bool {
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *countBudget) Release(n int) { b.used -= n }

// A frame over SetMax is refused at its header; a payload the budget
// cannot hold is refused with ErrBudget before it is allocated; Release
// returns every byte held.
func TestMaxAndBudget(t *testing.T) {
	frame := func(n int) []byte {
		return wire.AppendJSONFrame(nil, &wire.Publish{TenantID: "t", Namespace: "n", Stream: "s", Payload: make([]byte, n)})
	}
	b := &countBudget{limit: 100 << 10}
	stream := append(append(frame(10), frame(50<<10)...), frame(200<<10)...)
	r := NewReader(bytes.NewReader(stream), 1<<10)
	r.SetBudget(b)
	_, _, err := r.Next()
	require.NoError(t, err)
	_, _, err = r.Next()
	require.ErrorIs(t, err, wire.ErrFrameTooLarge, "over SetMax")
	r.Release()
	require.Zero(t, b.used)

	r = NewReader(bytes.NewReader(stream), 1<<10)
	r.SetBudget(b)
	_, _, err = r.Next()
	require.NoError(t, err)
	r.SetMax(1 << 20)
	_, _, err = r.Next()
	require.NoError(t, err)
	require.LessOrEqual(t, b.used, b.limit)
	_, _, err = r.Next()
	require.ErrorIs(t, err, ErrBudget)
	require.LessOrEqual(t, b.used, b.limit)
	r.Release()
	require.Zero(t, b.used)
}

// interrupting reads the bytes of stream a few at a time and fails every
// other read with errPause, as a stream read past its deadline does.
type interrupting struct {
	stream []byte
	calls  int
}

var errPause = errors.New("deadline")

func (r *interrupting) Read(p []byte) (int, error) {
	r.calls++
	if r.calls%2 == 0 {
		return 0, errPause
	}
	if len(r.stream) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 5)], r.stream)
	r.stream = r.stream[n:]
	return n, nil
}

// A read that fails part-way through a frame loses nothing: Next called
// again resumes the header or the payload where it stopped.
func TestNextResumesAFrameAfterAFailedRead(t *testing.T) {
	var stream []byte
	payloads := [][]byte{[]byte("x"), bytes.Repeat([]byte{7}, firstChunk+3), nil}
	for _, p := range payloads {
		stream = wire.AppendJSONFrame(stream, &wire.Publish{TenantID: "t", Namespace: "n", Stream: "s", Payload: p})
	}
	r := NewReader(&interrupting{stream: stream}, 16<<20)
	for i, want := range payloads {
		for {
			_, payload, err := r.Next()
			if errors.Is(err, errPause) {
				continue
			}
			require.NoError(t, err)
			m, err := wire.DecodeJSON(payload)
			require.NoError(t, err)
			require.Equal(t, len(want), len(m.(*wire.Publish).Payload), "frame %d", i)
			break
		}
	}
	_, _, err := r.Next()
	for errors.Is(err, errPause) {
		_, _, err = r.Next()
	}
	require.ErrorIs(t, err, io.EOF)
}

// With SetKeep, a buffer grown for a big frame serves the next ones: the
// budget is asked for nothing more.
func TestSetKeepKeepsABigBuffer(t *testing.T) {
	var stream []byte
	for range 3 {
		stream = wire.AppendJSONFrame(stream, &wire.Publish{TenantID: "t", Namespace: "n", Stream: "s", Payload: make([]byte, 2<<20)})
	}
	b := &countBudget{limit: 64 << 20}
	r := NewReader(bytes.NewReader(stream), 16<<20)
	r.SetBudget(b)
	r.SetKeep(4 << 20)
	_, _, err := r.Next()
	require.NoError(t, err)
	held := b.used
	for range 2 {
		_, _, err = r.Next()
		require.NoError(t, err)
		require.Equal(t, held, b.used)
	}
	r.Release()
	require.Zero(t, b.used)
}
