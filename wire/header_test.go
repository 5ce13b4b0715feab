package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

func hdr(magic uint32, version, flags uint16, length uint32) []byte {
	return []byte{
		byte(magic >> 24), byte(magic >> 16), byte(magic >> 8), byte(magic),
		byte(version >> 8), byte(version),
		byte(flags >> 8), byte(flags),
		byte(length >> 24), byte(length >> 16), byte(length >> 8), byte(length),
	}
}

func TestParseHeader(t *testing.T) {
	tests := []struct {
		name     string
		in       []byte
		maxFrame uint32
		want     wire.Header
		err      error
	}{
		{"json", hdr(wire.Magic, 1, 0, 13), 0, wire.Header{Length: 13}, nil},
		{"acked publish", hdr(wire.Magic, 1, 9, 41), 0, wire.Header{Flags: 9, Length: 41}, nil},
		{"extra bytes ignored", append(hdr(wire.Magic, 1, 0x24, 0), 1, 2, 3), 0, wire.Header{Flags: 0x24}, nil},
		{"empty", nil, 0, wire.Header{}, wire.ErrShortHeader},
		{"11 bytes", hdr(wire.Magic, 1, 0, 0)[:11], 0, wire.Header{}, wire.ErrTruncated},
		{"bad magic", hdr(0x464C5832, 1, 0, 0), 0, wire.Header{}, wire.ErrBadMagic},
		{"version 0", hdr(wire.Magic, 0, 0, 0), 0, wire.Header{}, wire.ErrUnsupportedVersion},
		{"version 2", hdr(wire.Magic, 2, 0, 0), 0, wire.Header{}, wire.ErrUnsupportedVersion},
		{"unknown bit 0x0800", hdr(wire.Magic, 1, 0x0800, 5), 0, wire.Header{Flags: 0x0800, Length: 5}, wire.ErrUnknownFlags},
		{"unknown bit on a layout", hdr(wire.Magic, 1, 0x0801, 5), 0, wire.Header{Flags: 0x0801, Length: 5}, wire.ErrUnknownFlags},
		{"invalid 0x03", hdr(wire.Magic, 1, 0x03, 5), 0, wire.Header{Flags: 0x03, Length: 5}, wire.ErrInvalidFlags},
		{"invalid 0x08 alone", hdr(wire.Magic, 1, 0x08, 0), 0, wire.Header{Flags: 0x08}, wire.ErrInvalidFlags},
		{"invalid 0x20 alone", hdr(wire.Magic, 1, 0x20, 0), 0, wire.Header{Flags: 0x20}, wire.ErrInvalidFlags},
		{"at default cap", hdr(wire.Magic, 1, 0, wire.DefaultMaxFrameBytes), 0, wire.Header{Length: wire.DefaultMaxFrameBytes}, nil},
		{"over default cap", hdr(wire.Magic, 1, 0, wire.DefaultMaxFrameBytes+1), 0, wire.Header{}, wire.ErrFrameTooLarge},
		{"over small cap", hdr(wire.Magic, 1, 0, 9), 8, wire.Header{}, wire.ErrFrameTooLarge},
		{"cap before flags", hdr(wire.Magic, 1, 0x40, 9), 8, wire.Header{}, wire.ErrFrameTooLarge},
		{"max u32", hdr(wire.Magic, 1, 0, 1<<32-1), 0, wire.Header{}, wire.ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := wire.ParseHeader(tt.in, tt.maxFrame)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.want, h)
		})
	}
}

func TestAppendHeader(t *testing.T) {
	got := wire.AppendHeader([]byte{0xAA}, wire.FlagBinaryPublishAck, 11)
	require.Equal(t, []byte{0xAA, 'F', 'L', 'X', '1', 0, 1, 0, 0x10, 0, 0, 0, 11}, got)
}

func TestSplitFrame(t *testing.T) {
	ok := append(hdr(wire.Magic, 1, 0, 13), `{"type":"ok"}`...)
	two := append(append([]byte{}, ok...), ok...)

	h, payload, rest, err := wire.SplitFrame(two, 0)
	require.NoError(t, err)
	require.Equal(t, wire.Header{Length: 13}, h)
	require.Equal(t, `{"type":"ok"}`, string(payload))
	require.Equal(t, ok, rest)
	require.Equal(t, 13, cap(payload), "payload must not let an append reach the next frame")

	_, _, _, err = wire.SplitFrame(ok[:20], 0)
	require.ErrorIs(t, err, wire.ErrTruncated)
	var te *wire.TruncatedError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 13, te.Need)
	require.Equal(t, 8, te.Have)

	_, _, _, err = wire.SplitFrame(ok[:3], 0)
	require.ErrorIs(t, err, wire.ErrShortHeader)

	// An unknown-flags frame is reported but can be skipped.
	bad := append(hdr(wire.Magic, 1, 0x0800, 2), 0xde, 0xad)
	h, payload, rest, err = wire.SplitFrame(append(bad, ok...), 0)
	require.ErrorIs(t, err, wire.ErrUnknownFlags)
	require.Equal(t, wire.Header{Flags: 0x0800, Length: 2}, h)
	require.Equal(t, []byte{0xde, 0xad}, payload)
	require.Equal(t, ok, rest)
}
