package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

var traceparent = []wire.EventHeader{{Key: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	{Key: "content-type", Value: "text/plain"}}

// headerMessages are the three events the header tests publish: two with
// headers and one without, in two batches.
var headerMessages = [][]client.Message{
	{{Payload: []byte("a"), Headers: traceparent}, {Payload: []byte("b")}},
	{{Payload: []byte("c"), Headers: traceparent[1:]}},
}

// rawSubscriber is a client from before headers: it offers the v1 flags
// and event offsets, no capability word, and reads its event stream's raw
// frames.
type rawSubscriber struct {
	qc *quic.Conn
	fr *frameio.Reader
}

func subscribeRaw(t *testing.T, h *harness, start *wire.Start) *rawSubscriber {
	ctx := ctxT(t, 10*time.Second)
	qc := h.rawConn(t)
	str, err := qc.OpenStreamSync(ctx)
	require.NoError(t, err)
	flags := uint16(wire.OriginalV1Flags | wire.FlagEventBatchOffsets)
	str.Write(wire.AppendJSONFrame(nil, &wire.Auth{TenantID: "t1", Token: "dev", ClientFlags: &flags}))
	str.Write(wire.AppendJSONFrame(nil, &wire.Subscribe{TenantID: "t1", Namespace: "default", Stream: "ev", Start: start}))
	es, err := qc.AcceptUniStream(ctx)
	require.NoError(t, err)
	rs := &rawSubscriber{qc: qc, fr: frameio.NewReader(es, wire.DefaultMaxFrameBytes)}
	h0, p, err := rs.fr.Next()
	require.NoError(t, err)
	require.Equal(t, wire.Flags(0), h0.Flags)
	require.Contains(t, string(p), "event_stream_hello")
	return rs
}

// next returns the next event frame, whole.
func (rs *rawSubscriber) next(t *testing.T) []byte {
	h, p, err := rs.fr.Next()
	require.NoError(t, err)
	return append(wire.AppendHeader(nil, h.Flags, uint32(len(p))), p...)
}

func frameOf(t *testing.T, base uint64, payloads ...string) []byte {
	e := wire.EventBatch{Shared: true, HasBaseOffset: true, BaseOffset: base}
	for _, p := range payloads {
		e.Payloads = append(e.Payloads, []byte(p))
	}
	f, err := wire.AppendEventBatchFrame(nil, e)
	require.NoError(t, err)
	return f
}

func publishHeaderMessages(t *testing.T, ctx context.Context, h *harness) {
	pub, err := h.dial(t).NewPublisher(ctx, "default", "ev")
	require.NoError(t, err)
	for _, batch := range headerMessages {
		require.NoError(t, pub.PublishMessages(ctx, batch))
	}
}

func requireHeaderEvents(t *testing.T, ctx context.Context, s *client.Subscription) []client.Event {
	var evs []client.Event
	for range 3 {
		ev, err := s.Next(ctx)
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	require.Equal(t, "a", string(evs[0].Payload))
	require.Equal(t, traceparent, evs[0].Headers)
	require.Nil(t, evs[1].Headers)
	require.Equal(t, traceparent[1:], evs[2].Headers)
	return evs
}

// docs/design.md, "Semantics", headers: an event's headers travel with it
// through publish, live delivery, a replay from the log after a restart,
// and consumer groups; a client that did not negotiate them receives
// exactly the frames it always did, live and in replay.
func TestHeadersRoundTrip(t *testing.T) {
	dir := t.TempDir()
	h := serveBroker(t, broker.Config{DataDir: dir}, durableSpec("ev", "periodic"))
	ctx := ctxT(t, 30*time.Second)
	stamped := client.DefaultFlags | wire.FlagEventTimestamps
	live, err := h.dialWith(t, client.Config{Flags: stamped}).Subscribe(ctx, "default", "ev", client.SubscribeOptions{})
	require.NoError(t, err)
	old := subscribeRaw(t, h, nil)
	publishHeaderMessages(t, ctx, h)

	liveEvs := requireHeaderEvents(t, ctx, live)
	require.False(t, liveEvs[0].Time.IsZero(), "a durable stream's events carry their append time")
	require.Equal(t, liveEvs[0].Time, liveEvs[1].Time, "one time per publish batch")
	require.Equal(t, frameOf(t, 0, "a", "b"), old.next(t), "the old client's frame is byte for byte the one without headers")
	require.Equal(t, frameOf(t, 2, "c"), old.next(t))

	require.NoError(t, h.b.Close())
	h = serveBroker(t, broker.Config{DataDir: dir})
	replay, err := h.dialWith(t, client.Config{Flags: stamped}).Subscribe(ctx, "default", "ev", client.SubscribeOptions{From: client.Earliest()})
	require.NoError(t, err)
	replayEvs := requireHeaderEvents(t, ctx, replay)
	for i := range replayEvs {
		require.True(t, liveEvs[i].Time.Equal(replayEvs[i].Time), "a replay reports the time live delivery did")
	}
	oldReplay := subscribeRaw(t, h, &wire.Start{Kind: wire.StartEarliest})
	require.Equal(t, frameOf(t, 0, "a", "b", "c"), oldReplay.next(t), "a replay without headers, byte for byte")

	q, err := h.dial(t).Consume(ctx, "default", "ev", "q", client.QueueOptions{})
	require.NoError(t, err)
	m, err := q.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, traceparent, m.Headers)
	g, err := h.dial(t).OpenGroup(ctx, "default", "ev", "g")
	require.NoError(t, err)
	recs, err := g.Poll(ctx, client.PollOptions{Max: 3})
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, traceparent, recs[0].Headers)
	require.Nil(t, recs[1].Headers)
	require.Equal(t, uint64(liveEvs[0].Time.UnixMicro()), uint64(recs[0].Time.UnixMicro()))
}

// An ephemeral stream's events report the publishing principal to a
// client that asked for publishers; a durable stream's only when the
// broker stores them (FELIX_RECORD_PUBLISHERS), and then in a replay too.
func TestEventPublisher(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	flags := client.DefaultFlags | wire.FlagEventPublisher
	for _, tc := range []struct {
		name    string
		cfg     broker.Config
		spec    broker.StreamSpec
		want    string
		durable bool
	}{
		{"memory", broker.Config{}, broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "ev"}, Shards: 1}, "dev", false},
		// The latency profile writes a live batch from the publishing
		// goroutine to an idle subscriber; one that reads publishers must
		// still get its re-encoded frame.
		{"memory latency profile", broker.Config{Batch: fanout.BatchConfig{MaxEvents: 1, MaxDelay: fanout.NoDelay}}, broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "ev"}, Shards: 1}, "dev", false},
		{"durable", broker.Config{DataDir: t.TempDir()}, durableSpec("ev", "periodic"), "", true},
		{"durable recorded", broker.Config{DataDir: t.TempDir(), RecordPublishers: true}, durableSpec("ev", "periodic"), "dev", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := serveBroker(t, tc.cfg, tc.spec)
			s, err := h.dialWith(t, client.Config{Flags: flags}).Subscribe(ctx, "default", "ev", client.SubscribeOptions{})
			require.NoError(t, err)
			publishHeaderMessages(t, ctx, h)
			ev, err := s.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.want, ev.Publisher)
			if !tc.durable {
				return
			}
			r, err := h.dialWith(t, client.Config{Flags: flags}).Subscribe(ctx, "default", "ev", client.SubscribeOptions{From: client.Earliest()})
			require.NoError(t, err)
			ev, err = r.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.want, ev.Publisher, "a replay reports what was stored")
		})
	}
}

// A group record names its publisher and time only to a client that
// offered the features; queue_message's headers only to one that offered
// CapHeaders.
func TestGroupRecordFieldsByNegotiation(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir(), RecordPublishers: true}, durableSpec("ev", "periodic"))
	ctx := ctxT(t, 30*time.Second)
	publishHeaderMessages(t, ctx, h)
	str, err := h.rawConn(t).OpenStreamSync(ctx)
	require.NoError(t, err)
	flags, features := uint16(wire.KnownFlags), uint32(wire.FeatureConsumerGroup)
	str.Write(wire.AppendJSONFrame(nil, &wire.Auth{TenantID: "t1", Token: "dev", ClientFlags: &flags, ClientFeatures: &features}))
	str.Write(wire.AppendJSONFrame(nil, &wire.GroupPoll{GroupRef: wire.GroupRef{TenantID: "t1", Namespace: "default", Stream: "ev", Group: "g"},
		MaxRecords: 1, RequestID: 1}))
	fr := frameio.NewReader(str, wire.DefaultMaxFrameBytes)
	_, _, err = fr.Next() // auth_ok
	require.NoError(t, err)
	_, p, err := fr.Next()
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(p, &got))
	rec := got["records"].([]any)[0].(map[string]any)
	require.ElementsMatch(t, []string{"offset", "payload", "attempts"}, keys(rec), "%s", p)
	require.True(t, bytes.HasPrefix(p, []byte(`{"type":"group_records","records":[{"offset":0,"payload":"YQ==","attempts":1}]`)))
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
