package wire

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRaftBatchRoundTrip(t *testing.T) {
	msgs := []RaftMessage{{Group: "t1/default/orders#0", Message: []byte{1, 2, 3}}, {Group: "t1/default/orders#1", Message: nil}}
	frame := appendFrame(t, nil, msgs)
	h, payload, rest, err := SplitFrame(frame, DefaultMaxFrameBytes)
	require.NoError(t, err)
	require.Empty(t, rest)
	require.Zero(t, h.Flags)
	got, err := DecodeRaftBatch(payload, nil)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, msgs[0], got[0])
	require.Equal(t, "t1/default/orders#1", got[1].Group)
	require.Empty(t, got[1].Message)

	for cut := range len(payload) {
		_, err := DecodeRaftBatch(payload[:cut], nil)
		require.Error(t, err, "cut at %d", cut)
	}
	_, err = DecodeRaftBatch(append(payload, 0), nil)
	require.ErrorIs(t, err, ErrTrailingBytes)
	_, err = DecodeRaftBatch([]byte{0xff, 0xff, 0xff, 0xff}, nil)
	require.ErrorIs(t, err, ErrCountTooLarge)
}

// appendFrame builds a frame of msgs in place after dst.
func appendFrame(t *testing.T, dst []byte, msgs []RaftMessage) []byte {
	start := len(dst)
	dst = BeginRaftBatchFrame(dst)
	for _, m := range msgs {
		var err error
		dst, err = AppendRaftMessage(dst, m.Group, func(b []byte) ([]byte, error) { return append(b, m.Message...), nil })
		require.NoError(t, err)
	}
	return EndRaftBatchFrame(dst, start, len(msgs))
}

// A frame built in place is a header and the payload AppendRaftBatch
// encodes; a message whose encoding fails leaves the frame as it was.
func TestRaftBatchFrameInPlace(t *testing.T) {
	msgs := []RaftMessage{{Group: "t1/default/orders#0", Message: []byte{1, 2, 3}}, {Group: "g", Message: nil}}
	payload, err := AppendRaftBatch(nil, msgs)
	require.NoError(t, err)
	want := append(AppendHeader([]byte("x"), 0, uint32(len(payload))), payload...)
	require.Equal(t, want, appendFrame(t, []byte("x"), msgs))

	got := BeginRaftBatchFrame([]byte("x"))
	before := len(got)
	got, err = AppendRaftMessage(got, "g", func(b []byte) ([]byte, error) { return append(b, 9), errTest })
	require.ErrorIs(t, err, errTest)
	require.Len(t, got, before)
}

var errTest = errors.New("test")

// FuzzRaftBatch: any input decodes or is refused, never panics, and what
// decodes encodes back to the same bytes.
func FuzzRaftBatch(f *testing.F) {
	seed, _ := AppendRaftBatch(nil, []RaftMessage{{Group: "t/n/s#0", Message: []byte("m")}})
	f.Add(seed)
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 1, 0, 1, 'g', 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := DecodeRaftBatch(b, nil)
		if err != nil {
			return
		}
		again, err := AppendRaftBatch(nil, msgs)
		require.NoError(t, err)
		require.Equal(t, b, again)
	})
}
