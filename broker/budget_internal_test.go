package broker

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

// fuzzFrameConfig has small limits, so that short inputs cross them.
var fuzzFrameConfig = Config{
	PreAuthMaxFrameBytes: 256, PreAuthMaxStreams: 2, MaxFrameBytes: 2 << 10,
	ConnectionReceiveWindow: 3 << 10, FrameBufferBytes: 4 << 10,
}.withDefaults()

var fuzzAuthFrame = wire.AppendJSONFrame(nil, &wire.Auth{TenantID: "t1", Token: "dev"})

// preAuthStream is one stream of FuzzPreAuthFrames: its reader, and its
// own budget (a child of its connection's), which says what it holds.
type preAuthStream struct {
	fr     *frameio.Reader
	held   *byteBudget
	conn   int
	authed bool
}

// FuzzPreAuthFrames drives the broker's frame path before and during auth
// on many streams of two connections, as the streams' handlers read them
// (newFrameReader, liftFrameLimit, the connection and broker budgets),
// with the streams' bytes in memory so that every input runs the same way.
// The first byte says how many streams (1 to 8) the rest is cut into and
// over how many connections (1 or 2) they are spread; a part whose first
// byte is odd has it replaced by a valid auth frame. Each stream is read
// until it ends or stops mid-frame, where it keeps what it holds, as a
// stream whose peer stops sending does; a connection reads at most
// PreAuthMaxStreams streams before auth, the next wait unread. Checked
// after every frame: no stream holds more than its frame limit before
// auth, no connection more than its receive window, the broker no more
// than its budget; and at the end everything held is returned.
func FuzzPreAuthFrames(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		cfg := fuzzFrameConfig
		all := newByteBudget(cfg.FrameBufferBytes, nil)
		conns := []*byteBudget{newByteBudget(int64(cfg.ConnectionReceiveWindow), all), newByteBudget(int64(cfg.ConnectionReceiveWindow), all)}
		waiting := [2]int{} // streams stopped mid-frame before auth: they hold a pre-auth slot
		check := func() {
			for _, c := range conns {
				require.LessOrEqual(t, c.used.Load(), c.limit)
			}
			require.LessOrEqual(t, all.used.Load(), all.limit)
		}
		var streams []*preAuthStream
		for i, part := range fuzzStreams(data) {
			conn := i % (1 + int(data[0]>>3)%2)
			if waiting[conn] == cfg.PreAuthMaxStreams {
				continue // no slot: never read
			}
			held := newByteBudget(math.MaxInt64, conns[conn])
			s := &preAuthStream{fr: newFrameReader(bytes.NewReader(part), cfg, held), held: held, conn: conn}
			streams = append(streams, s)
			if s.read(t, cfg, check) && !s.authed {
				waiting[conn]++
			}
		}
		for _, s := range streams {
			s.fr.Release()
		}
		require.Zero(t, all.used.Load(), "every byte held is returned")
	})
}

// fuzzStreams cuts data[1:] into 1 + data[0]%8 parts.
func fuzzStreams(data []byte) [][]byte {
	n := 1 + int(data[0]%8)
	parts := make([][]byte, n)
	for i, rest := 0, data[1:]; i < n; i++ {
		cut := len(rest) / (n - i)
		parts[i], rest = rest[:cut], rest[cut:]
		if len(parts[i]) > 0 && parts[i][0]&1 == 1 {
			parts[i] = append(bytes.Clone(fuzzAuthFrame), parts[i][1:]...)
		}
	}
	return parts
}

// read reads s until it ends (false; its buffer is let go, as its handler
// does) or stops mid-frame (true; it keeps its buffer).
func (s *preAuthStream) read(t *testing.T, cfg Config, check func()) (stalled bool) {
	for {
		h, payload, err := s.fr.Next()
		limit := int64(cfg.MaxFrameBytes)
		if !s.authed {
			limit = int64(cfg.PreAuthMaxFrameBytes)
		}
		require.LessOrEqual(t, s.held.used.Load(), limit, "a stream holds more than its frame limit")
		check()
		var flagsErr *wire.FlagsError
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			return true
		case err != nil && !(s.authed && errors.As(err, &flagsErr)):
			s.fr.Release()
			return false
		case !s.authed:
			m, derr := decodeJSON(h, payload)
			if _, ok := m.(*wire.Auth); derr != nil || !ok {
				s.fr.Release()
				return false
			}
			s.authed = true
			liftFrameLimit(s.fr, cfg)
		}
	}
}
