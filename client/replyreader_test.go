package client

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

// pipeReplies is a replyReader over a pipe the test writes replies into:
// each reply is a publish_ok whose request id closes that id's channel.
type pipeReplies struct {
	w     *os.File
	rr    *replyReader
	mu    sync.Mutex
	done  map[uint64]chan struct{}
	ended chan error
	want  bool
}

func newPipeReplies(t *testing.T) *pipeReplies {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(); w.Close() })
	pr := &pipeReplies{w: w, done: map[uint64]chan struct{}{}, ended: make(chan error, 1)}
	pr.rr = newReplyReader(frameio.NewReader(r, wire.DefaultMaxFrameBytes), r, nil, nil,
		func(_ wire.Header, payload []byte) error {
			m, err := wire.DecodeJSON(payload)
			if err != nil {
				return err
			}
			id := m.(*wire.PublishOK).RequestID
			pr.mu.Lock()
			defer pr.mu.Unlock()
			close(pr.doneLocked(id))
			return nil
		},
		func() (bool, bool) { pr.mu.Lock(); defer pr.mu.Unlock(); return pr.want, pr.want },
		func(err error) { pr.ended <- err })
	return pr
}

func (pr *pipeReplies) doneLocked(id uint64) chan struct{} {
	if pr.done[id] == nil {
		pr.done[id] = make(chan struct{})
	}
	return pr.done[id]
}

func (pr *pipeReplies) wait(id uint64) <-chan struct{} {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.doneLocked(id)
}

func (pr *pipeReplies) reply(id uint64) []byte {
	return wire.AppendJSONFrame(nil, &wire.PublishOK{RequestID: id})
}

// A caller waiting for its reply reads the stream itself when nobody else
// does, handling the replies before its own on the way, and gives the turn
// back once its own came: the next caller reads too, with no reader
// goroutine running at all.
func TestAWaitingCallerReadsItsOwnReply(t *testing.T) {
	pr := newPipeReplies(t)
	_, err := pr.w.Write(append(pr.reply(1), pr.reply(2)...))
	require.NoError(t, err)
	require.NoError(t, pr.rr.await(t.Context(), pr.wait(2)))
	require.True(t, closed(pr.wait(1)), "the earlier reply was handled on the way")

	_, err = pr.w.Write(pr.reply(3))
	require.NoError(t, err)
	require.NoError(t, pr.rr.await(t.Context(), pr.wait(3)))
}

// A caller whose context ends while it reads gives up at once and leaves
// the stream whole: a reply cut in two by its giving up is read complete
// by whoever reads next, and no read deadline is left behind.
func TestACallerGivingUpLeavesTheStreamWhole(t *testing.T) {
	pr := newPipeReplies(t)
	frame := pr.reply(7)
	_, err := pr.w.Write(frame[:5])
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, pr.rr.await(ctx, pr.wait(7)), context.DeadlineExceeded)

	_, err = pr.w.Write(frame[5:])
	require.NoError(t, err)
	require.NoError(t, pr.rr.await(t.Context(), pr.wait(7)))
	select {
	case err := <-pr.ended:
		t.Fatalf("reading stopped: %v", err)
	default:
	}
}

// The reader goroutine reads, once asked, the replies nobody waits for, and
// tells why reading stopped; a caller waiting then is answered by it.
func TestTheReaderGoroutineReadsWhatNobodyWaitsFor(t *testing.T) {
	pr := newPipeReplies(t)
	pr.mu.Lock()
	pr.want = true
	pr.mu.Unlock()
	var wg sync.WaitGroup
	pr.rr.start(&wg)
	pr.rr.ask()
	_, err := pr.w.Write(pr.reply(1))
	require.NoError(t, err)
	<-pr.wait(1)
	_, err = pr.w.Write(pr.reply(2))
	require.NoError(t, err)
	require.NoError(t, pr.rr.await(t.Context(), pr.wait(2)))
	pr.w.Close()
	require.ErrorIs(t, <-pr.ended, io.EOF)
	wg.Wait()
	require.True(t, closed(pr.rr.done))
}

// A caller whose stream ends before its reply came keeps waiting for the
// reply (an idempotent batch is answered on the connection it is sent
// again on), never returning as if answered.
func TestAWaitingCallerOutlivesTheStreamItRead(t *testing.T) {
	pr := newPipeReplies(t)
	pr.w.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, pr.rr.await(ctx, pr.wait(9)), context.DeadlineExceeded)
	require.ErrorIs(t, <-pr.ended, io.EOF)
	go func() {
		pr.mu.Lock()
		close(pr.doneLocked(9)) // answered elsewhere
		pr.mu.Unlock()
	}()
	require.NoError(t, pr.rr.await(t.Context(), pr.wait(9)))
}
