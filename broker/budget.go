package broker

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/internal/invariants"
)

// What an unauthenticated peer can make the broker hold is bounded at
// three levels:
//
//   - a stream reads its first frame (the auth frame) with a limit of
//     Config.PreAuthMaxFrameBytes, raised to MaxFrameBytes once it has
//     authenticated;
//   - a connection has at most Config.PreAuthMaxStreams streams reading
//     their auth frame at a time; the next streams wait, unread, in
//     quic-go's accept queue;
//   - a connection's QUIC receive window starts at what those streams'
//     auth frames need, and quic-go's auto-tuning may grow it (up to
//     ConnectionReceiveWindow) only once a stream of the connection has
//     authenticated: data a peer sends ahead of what the broker reads sits
//     in quic-go's buffers, within that window.
//
// Bytes read for frames not yet complete are reserved from the
// connection's frame budget (ConnectionReceiveWindow), itself reserved from
// the broker's (FrameBufferBytes), so no number of streams or connections
// makes them exceed either; a stream whose frame would is ended.

// byteBudget counts bytes against a limit and, if it has one, against its
// parent's too. Safe for concurrent use.
type byteBudget struct {
	limit  int64
	used   atomic.Int64
	parent *byteBudget
	// refused counts refusals at every level of the tree it is shared by.
	refused *atomic.Uint64
}

func newByteBudget(limit int64, parent *byteBudget) *byteBudget {
	b := &byteBudget{limit: limit, parent: parent, refused: &atomic.Uint64{}}
	if parent != nil {
		b.refused = parent.refused
	}
	return b
}

// Take implements frameio.Budget.
func (b *byteBudget) Take(n int) bool {
	if b.used.Add(int64(n)) > b.limit {
		b.used.Add(-int64(n))
		b.refused.Add(1)
		return false
	}
	if b.parent != nil && !b.parent.Take(n) {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

// Release implements frameio.Budget.
func (b *byteBudget) Release(n int) {
	if used := b.used.Add(-int64(n)); invariants.Enabled && used < 0 {
		panic(fmt.Sprintf("broker: frame budget released %d bytes more than it holds", -used))
	}
	if b.parent != nil {
		b.parent.Release(n)
	}
}

// connState is what the broker knows about a connection from its
// handshake on, before its conn exists; it travels in the connection's
// context so that quic-go's callbacks can find it.
type connState struct {
	// authed is set once any stream of the connection has authenticated.
	authed atomic.Bool
}

type connStateKey struct{}

func withConnState(ctx context.Context) context.Context {
	return context.WithValue(ctx, connStateKey{}, &connState{})
}

func stateOf(ctx context.Context) *connState {
	st, _ := ctx.Value(connStateKey{}).(*connState)
	return st
}

// allowWindowIncrease is quic.Config.AllowConnectionWindowIncrease: only
// a connection that authenticated a stream gets a larger window.
func allowWindowIncrease(qc *quic.Conn, _ uint64) bool {
	st := stateOf(qc.Context())
	return st != nil && st.authed.Load()
}

// newFrameReader reads a stream's frames within budget, with the pre-auth
// frame limit until authenticated raises it.
func newFrameReader(r io.Reader, cfg Config, budget *byteBudget) *frameio.Reader {
	fr := frameio.NewReader(r, cfg.PreAuthMaxFrameBytes)
	fr.SetBudget(budget)
	return fr
}

// liftFrameLimit gives an authenticated stream's frames MaxFrameBytes.
func liftFrameLimit(fr *frameio.Reader, cfg Config) { fr.SetMax(cfg.MaxFrameBytes) }

// preAuthWindow is the receive window a connection starts with: room for
// the auth frames of the streams it may authenticate at once.
func (c Config) preAuthWindow() uint64 {
	return min(c.ConnectionReceiveWindow, uint64(c.PreAuthMaxFrameBytes)*uint64(c.PreAuthMaxStreams))
}

// PeerStats is what the bounds on peers hold and have refused.
type PeerStats struct {
	// FrameBufferBytes is held for frames not yet complete, all
	// connections; FrameBufferRefusals counts streams ended for a frame
	// beyond their connection's or the broker's budget.
	FrameBufferBytes    int64  `json:"frame_buffer_bytes"`
	FrameBufferRefusals uint64 `json:"frame_buffer_refusals"`
}

func (b *Broker) peerStats() PeerStats {
	return PeerStats{FrameBufferBytes: b.frames.used.Load(), FrameBufferRefusals: b.frames.refused.Load()}
}
