package client

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
)

// decodeFrame splits one frame as the subscription's reader gets it.
func decodeFrame(t *testing.T, s *Subscription, frame []byte) ([]Event, error) {
	t.Helper()
	h, payload, rest, err := wire.SplitFrame(frame, wire.DefaultMaxFrameBytes)
	require.NoError(t, err)
	require.Empty(t, rest)
	var batch wire.EventBatch
	f := &subscriptionFeed{dropped: &s.dropped}
	return f.decode(h, payload, &batch)
}

// An event batch becomes one event per payload, numbered from the batch's
// base offset (the broker sends offsets to clients that negotiate them),
// each payload the caller's to keep; a gap report becomes one Event with
// Dropped set and is counted; anything else on an event stream is a
// protocol error.
func TestSubscriptionDecode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batch   wire.EventBatch
		want    []Event
		dropped uint64
	}{
		{name: "shared batch with offsets",
			batch: wire.EventBatch{Shared: true, HasBaseOffset: true, BaseOffset: 41, Payloads: [][]byte{[]byte("a"), {}, []byte("ccc")}},
			want: []Event{{Offset: 41, HasOffset: true, Payload: []byte("a")}, {Offset: 42, HasOffset: true, Payload: []byte{}},
				{Offset: 43, HasOffset: true, Payload: []byte("ccc")}}},
		{name: "legacy batch without offsets",
			batch: wire.EventBatch{SubscriptionID: 7, Payloads: [][]byte{[]byte("x")}},
			want:  []Event{{Payload: []byte("x")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame, err := wire.AppendEventBatchFrame(nil, tc.batch)
			require.NoError(t, err)
			s := &Subscription{}
			evs, err := decodeFrame(t, s, frame)
			require.NoError(t, err)
			require.Equal(t, tc.want, evs)
			// The payloads are copies: the reader's buffer may change.
			for i := range frame {
				frame[i] = 0xff
			}
			require.Equal(t, tc.want, evs)
		})
	}

	s := &Subscription{}
	for _, n := range []uint64{3, 4} {
		evs, err := decodeFrame(t, s, jsonFrame(&wire.SubscriptionGap{SubscriptionID: 1, Dropped: n}))
		require.NoError(t, err)
		require.Equal(t, []Event{{Dropped: n}}, evs)
	}
	require.Equal(t, uint64(7), s.Dropped(), "gap reports add up")

	_, err := decodeFrame(t, s, jsonFrame(&wire.PublishOK{RequestID: 1}))
	require.ErrorIs(t, err, ErrProtocol)
}

// Next hands out a batch's events one by one, counting events and not gap
// reports as delivered, and keeps the offset it would resume at.
func TestSubscriptionNextCountsDeliveries(t *testing.T) {
	s := &Subscription{}
	s.cur = []Event{{Payload: []byte("a"), Offset: 4, HasOffset: true}, {Dropped: 2}, {Payload: []byte("b"), Offset: 7, HasOffset: true}}
	for _, want := range s.cur {
		ev, err := s.Next(t.Context())
		require.NoError(t, err)
		require.Equal(t, want, ev)
	}
	require.Equal(t, uint64(2), s.Delivered())
	require.Equal(t, uint64(8), s.next, "resume after the last event returned")
	require.True(t, s.hasNext)
}

// Only a subscription that can resume, knows where, and lost its
// connection to a redial resumes; any other end is returned.
func TestSubscriptionResumesOnlyAfterARedial(t *testing.T) {
	s := &Subscription{resume: func(context.Context, From) (*subscriptionFeed, *wire.Subscribed, error) { return nil, nil, nil }}
	require.False(t, s.resumable(ErrPathStalled), "no offset to resume at yet")
	s.next, s.hasNext = 5, true
	require.True(t, s.resumable(fmt.Errorf("%w: %w", ErrPathStalled, ErrClosed)))
	require.False(t, s.resumable(ErrClosed))
	require.False(t, s.resumable(ErrSlowConsumer))
	s.resume = nil
	require.False(t, s.resumable(ErrPathStalled), "a keyed watch cannot resume")
}

// The start of a subscription: latest by default, earliest, or an offset.
func TestFromOptions(t *testing.T) {
	require.Equal(t, From{kind: wire.StartLatest, set: true}, Latest())
	require.Equal(t, From{kind: wire.StartEarliest, set: true}, Earliest())
	require.Equal(t, From{kind: wire.StartOffset, offset: 17, set: true}, Offset(17))
}
