package broker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// rawStream is a control stream driven frame by frame, for answers the SDK
// would hide (refusals, offsets, codes).
type rawStream struct {
	t   *testing.T
	str *quic.Stream
	fr  *frameio.Reader
}

// openRaw authenticates a control stream offering every frame flag, the
// given published features and every Felix-Go capability.
func openRaw(t *testing.T, h *harness, features wire.Features) *rawStream {
	t.Helper()
	str, err := h.rawConn(t).OpenStreamSync(ctxT(t, 10*time.Second))
	require.NoError(t, err)
	flags, caps, f := wire.KnownCapabilities.FrameFlags(), wire.KnownCapabilities.Caps(), uint32(features)
	r := &rawStream{t: t, str: str, fr: frameio.NewReader(str, 0)}
	r.send(wire.AppendJSONFrame(nil, &wire.Auth{TenantID: "t1", Token: "dev", ClientFlags: &flags, ClientFeatures: &f, ClientCaps: &caps}))
	ok, isOK := r.json().(*wire.AuthOK)
	require.True(t, isOK)
	// The group features depend on the broker's durable storage.
	require.Equal(t, uint32(broker.ServerFeatures&^wire.GroupFeatures), *ok.ServerFeatures&^uint32(wire.GroupFeatures))
	return r
}

func (r *rawStream) send(frame []byte) {
	_, err := r.str.Write(frame)
	require.NoError(r.t, err)
}

func (r *rawStream) next() (wire.Header, []byte) {
	r.t.Helper()
	r.str.SetReadDeadline(time.Now().Add(10 * time.Second))
	h, payload, err := r.fr.Next()
	require.NoError(r.t, err)
	return h, payload
}

func (r *rawStream) json() wire.Message {
	r.t.Helper()
	h, payload := r.next()
	require.Equal(r.t, wire.Flags(0), h.Flags)
	m, err := wire.DecodeJSON(payload)
	require.NoError(r.t, err)
	return m
}

func (r *rawStream) ack() wire.PublishAck {
	r.t.Helper()
	h, payload := r.next()
	var a wire.PublishAck
	require.NoError(r.t, wire.DecodePublishAckFlags(h.Flags, payload, &a))
	return a
}

// idem sends an idempotent batch, binary or JSON, and returns the answer.
func (r *rawStream) idem(binary bool, stream string, id, seq, req uint64, payloads ...string) wire.Message {
	r.t.Helper()
	ps := make([][]byte, len(payloads))
	for i, p := range payloads {
		ps[i] = []byte(p)
	}
	if binary {
		frame, err := wire.AppendAckedPublish(nil, &wire.AckedPublish{RequestID: req, Idempotent: true, ProducerID: id, Sequence: seq,
			PublishBatch: wire.PublishBatch{TenantID: "t1", Namespace: "default", Stream: stream, Payloads: ps}})
		require.NoError(r.t, err)
		r.send(frame)
	} else {
		r.send(wire.AppendJSONFrame(nil, &wire.PublishIdempotent{TenantID: "t1", Namespace: "default", Stream: stream,
			Payloads: ps, RequestID: req, ProducerID: id, Sequence: seq}))
	}
	return r.json()
}

func okAt(t *testing.T, m wire.Message, req, offset uint64) {
	t.Helper()
	ok, isOK := m.(*wire.PublishOK)
	require.True(t, isOK, "%s", m.AppendJSON(nil))
	require.Equal(t, req, ok.RequestID)
	require.NotNil(t, ok.Offset)
	require.Equal(t, offset, *ok.Offset)
}

func refused(t *testing.T, m wire.Message, want wire.Refusal) {
	t.Helper()
	r, ok := m.(*wire.PublishRefused)
	require.True(t, ok, "%s", m.AppendJSON(nil))
	require.Equal(t, want, r.Reason)
}

// TestIdempotentPublishDecisions walks a producer through every answer, on
// a durable (on_commit) and an ephemeral stream, binary and JSON mixed:
// the next sequence is appended, a re-send gets its original offset and is
// not written again, and the rest is refused as the published Felix
// defines it.
func TestIdempotentPublishDecisions(t *testing.T) {
	for _, spec := range []broker.StreamSpec{durableSpec("idem", "on_commit"), {StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "idem"}, Shards: 1}} {
		t.Run(map[bool]string{true: "durable", false: "ephemeral"}[spec.Durable], func(t *testing.T) {
			h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, spec)
			r := openRaw(t, h, wire.KnownFeatures)
			r.send(wire.AppendJSONFrame(nil, &wire.ProducerInit{RequestID: 1}))
			init, ok := r.json().(*wire.ProducerInitOK)
			require.True(t, ok)
			require.NotZero(t, init.ProducerID)
			id := init.ProducerID

			okAt(t, r.idem(true, "idem", id, 0, 2, "a", "b"), 2, 0)
			okAt(t, r.idem(false, "idem", id, 1, 3, "c"), 3, 2)
			okAt(t, r.idem(true, "idem", id, 0, 4, "a", "b"), 4, 0) // re-sent: the original offset
			okAt(t, r.idem(false, "idem", id, 1, 5, "c"), 5, 2)     // JSON re-send of the same
			okAt(t, r.idem(true, "idem", id, 2, 6, "d"), 6, 3)      // written once each: next offset 3
			refused(t, r.idem(true, "idem", id, 5, 7, "x"), wire.Refusal{Kind: wire.RefusedSequenceGap, Expected: 3})
			refused(t, r.idem(true, "idem", id, 2, 8, "other"), wire.Refusal{Kind: wire.RefusedSequenceReused})
			refused(t, r.idem(true, "idem", id+1, 4, 9, "x"), wire.Refusal{Kind: wire.RefusedUnknownProducer})
			for seq := uint64(3); seq < 3+64; seq++ {
				okAt(t, r.idem(true, "idem", id, seq, 100+seq, "n"), 100+seq, seq+1)
			}
			refused(t, r.idem(false, "idem", id, 2, 10, "d"), wire.Refusal{Kind: wire.RefusedSequenceExpired})
			okAt(t, r.idem(false, "idem", id, 3, 11, "n"), 11, 4) // the oldest remembered

			// A client without sequence_reused gets the original answer, and
			// nothing is written (as the published broker answers it).
			old := openRaw(t, h, wire.KnownFeatures&^wire.FeatureSequenceReused)
			okAt(t, old.idem(true, "idem", id, 66, 12, "other"), 12, 67)

			sub, err := h.dial(t).Subscribe(ctxT(t, 10*time.Second), "default", "idem", client.SubscribeOptions{From: client.Earliest()})
			require.NoError(t, err)
			var got []string
			for len(got) < 68 {
				ev, err := sub.Next(ctxT(t, 10*time.Second))
				require.NoError(t, err)
				got = append(got, string(ev.Payload))
			}
			require.Equal(t, []string{"a", "b", "c", "d", "n"}, got[:5], "every batch exactly once")
			okAt(t, r.idem(true, "idem", id, 67, 13, "last"), 13, 68) // so nothing more was written
		})
	}
}

// TestIdempotentStateSurvivesRestart: the marks in the log let a restarted
// broker answer re-sends exactly as before, and the producer continues.
func TestIdempotentStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	h := serveBroker(t, broker.Config{DataDir: dir}, durableSpec("idem", "on_commit"))
	r := openRaw(t, h, wire.KnownFeatures)
	for seq := range uint64(100) {
		okAt(t, r.idem(seq%2 == 0, "idem", 42, seq, seq, "p", "q"), seq, 2*seq)
	}
	okAt(t, r.idem(true, "idem", 7, 0, 1, "other producer"), 1, 200)
	require.NoError(t, h.b.Close())

	h2 := serveBroker(t, broker.Config{DataDir: dir})
	r2 := openRaw(t, h2, wire.KnownFeatures)
	okAt(t, r2.idem(true, "idem", 42, 99, 1, "p", "q"), 1, 198)
	okAt(t, r2.idem(false, "idem", 42, 36, 2, "p", "q"), 2, 72)
	refused(t, r2.idem(true, "idem", 42, 35, 3, "p", "q"), wire.Refusal{Kind: wire.RefusedSequenceExpired})
	refused(t, r2.idem(true, "idem", 42, 50, 4, "x", "y"), wire.Refusal{Kind: wire.RefusedSequenceReused})
	okAt(t, r2.idem(true, "idem", 7, 0, 5, "other producer"), 5, 200)
	okAt(t, r2.idem(true, "idem", 42, 100, 6, "next"), 6, 201)
	refused(t, r2.idem(true, "idem", 42, 102, 7, "x"), wire.Refusal{Kind: wire.RefusedSequenceGap, Expected: 101})
}

// TestKeyedPublishRoutesAsPublished: a keyed binary publish (0x0049) lands
// on the shard the published Felix's routing gives its key, and the ack
// says where and at which offset.
func TestKeyedPublishRoutesAsPublished(t *testing.T) {
	eight := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "eight"}, Shards: 8}
	jump := eight
	jump.Stream, jump.Routing = "jump", "jump_hash"
	h := serveBroker(t, broker.Config{}, eight, jump)
	r := openRaw(t, h, wire.KnownFeatures)
	for i, c := range []struct {
		stream, key string
		shard       uint32
	}{{"eight", "customer-1", 3}, {"eight", "customer-6", 4}, {"jump", "customer-1", 0}, {"jump", "customer-6", 7}, {"eight", "customer-1", 3}} {
		frame, err := wire.AppendAckedPublish(nil, &wire.AckedPublish{RequestID: uint64(i), Mode: wire.AckPerBatch,
			PublishBatch: wire.PublishBatch{TenantID: "t1", Namespace: "default", Stream: c.stream, Key: []byte(c.key), HasKey: true,
				Payloads: [][]byte{[]byte("x")}}})
		require.NoError(t, err)
		r.send(frame)
		a := r.ack()
		require.Equal(t, wire.AckOK, a.Status, a.Message)
		require.True(t, a.HasShard && a.HasOffset)
		require.Equal(t, c.shard, a.Shard, "%s %s", c.stream, c.key)
		require.Equal(t, uint64(map[bool]int{true: 1, false: 0}[i == 4]), a.Offset)
	}
	r.send(wire.AppendJSONFrame(nil, &wire.StreamShards{TenantID: "t1", Namespace: "default", Stream: "jump", RequestID: 9}))
	view, ok := r.json().(*wire.StreamShardsView)
	require.True(t, ok)
	require.Equal(t, uint32(8), view.Shards)
	require.Equal(t, "jump_hash", *view.Routing)
}

// TestTypedErrorsOnTheWire: refusals carry their code and retry class to a
// client that negotiated them, in binary acks and JSON answers; a client
// that did not gets the same bytes as before.
func TestTypedErrorsOnTheWire(t *testing.T) {
	h := serveBroker(t, broker.Config{}, demo)
	r := openRaw(t, h, wire.KnownFeatures)
	frame, err := wire.AppendAckedPublishFrame(nil, 1, wire.AckPerBatch, "t1", "default", "nope", [][]byte{[]byte("x")})
	require.NoError(t, err)
	r.send(frame)
	a := r.ack()
	require.Equal(t, wire.AckError, a.Status)
	require.Equal(t, &wire.TypedError{Code: wire.CodeNotFound, Retry: wire.RetryAfter}, a.Err)
	require.False(t, a.HasOffset)

	zero, nine := uint64(0), uint32(9)
	r.send(wire.AppendJSONFrame(nil, &wire.PublishBatchMessage{TenantID: "t1", Namespace: "default", Stream: "demo",
		Payloads: [][]byte{[]byte("x")}, RequestID: &zero, Shard: &nine}))
	pe, ok := r.json().(*wire.PublishError)
	require.True(t, ok)
	require.Equal(t, wire.CodeInvalidRequest, pe.Err.Code)
	require.Equal(t, wire.Fatal, pe.Err.Retry)

	r.send(wire.AppendJSONFrame(nil, &wire.PublishBatchMessage{TenantID: "t1", Namespace: "default", Stream: "demo", Payloads: [][]byte{[]byte("x")}}))
	em, ok := r.json().(*wire.ErrorMessage)
	require.True(t, ok)
	require.Equal(t, "missing request_id for acked publish", em.Message)
	require.Equal(t, wire.CodeInvalidRequest, em.Err.Code)

	r.send(wire.AppendJSONFrame(nil, &wire.PublishBatchMessage{TenantID: "t2", Namespace: "default", Stream: "demo",
		Payloads: [][]byte{[]byte("x")}, RequestID: &zero}))
	pe, ok = r.json().(*wire.PublishError)
	require.True(t, ok)
	require.Equal(t, wire.CodeForbidden, pe.Err.Code)

	// Without the feature: no code, the v1 answer.
	plain := openRaw(t, h, 0)
	plain.send(wire.AppendJSONFrame(nil, &wire.PublishBatchMessage{TenantID: "t1", Namespace: "default", Stream: "nope",
		Payloads: [][]byte{[]byte("x")}, RequestID: &zero}))
	pe, ok = plain.json().(*wire.PublishError)
	require.True(t, ok)
	require.Nil(t, pe.Err)
}

// TestClusterIdempotentPublishIsNotForwarded: only the shard's owner takes
// an idempotent batch (a forward carries no producer identity); another
// broker refuses it not_leader, naming the owner.
func TestClusterIdempotentPublishIsNotForwarded(t *testing.T) {
	nodes, _ := startCluster(t, []string{"b1", "b2"}, []broker.StreamSpec{quad}, false)
	p := assign(3, members(nodes), quad.StreamKey, false, "b1", "b2", "b1", "b2")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	shard := uint32(1)
	m := &wire.PublishIdempotent{TenantID: "t1", Namespace: "default", Stream: "quad", Payloads: [][]byte{[]byte("x")},
		RequestID: 1, ProducerID: 5, Shard: &shard}
	r := openRaw(t, nodes[0].h, wire.KnownFeatures)
	r.send(wire.AppendJSONFrame(nil, m))
	refused(t, r.json(), wire.Refusal{Kind: wire.RefusedNotLeader, NodeID: "b2", Addr: &nodes[1].h.addr})
	require.Zero(t, nodes[0].b.ClusterStats().ForwardedPublishes)
	owner := openRaw(t, nodes[1].h, wire.KnownFeatures)
	owner.send(wire.AppendJSONFrame(nil, m))
	ok, isOK := owner.json().(*wire.PublishOK)
	require.True(t, isOK)
	require.Equal(t, uint32(1), *ok.Shard)
	require.Equal(t, "b2", ok.Owner.ID)
}

// TestIdempotentOnAV2Log: a shard whose log a build before format v3
// wrote (v2 segments) opens, keeps its records, takes idempotent batches
// (its v2 active segment is rolled before the first mark), and answers a
// re-send after a restart.
func TestIdempotentOnAV2Log(t *testing.T) {
	dir := t.TempDir()
	shardDir := filepath.Join(dir, segment.ShardDirName("t1", "default", "idem", 0))
	require.NoError(t, os.MkdirAll(shardDir, 0o755))
	v2 := segment.AppendSegmentHeader(nil, segment.SegmentHeader{Version: segment.FormatVersionV2})
	for i := range 3 {
		v2 = segment.AppendRecord(v2, uint64(i), 1, []byte(fmt.Sprintf("old %d", i)))
	}
	v2 = append(v2, make([]byte, 4096)...)
	require.NoError(t, os.WriteFile(filepath.Join(shardDir, fmt.Sprintf("%020d.log", 0)), v2, 0o644))

	h := serveBroker(t, broker.Config{DataDir: dir}, durableSpec("idem", "on_commit"))
	r := openRaw(t, h, wire.KnownFeatures)
	okAt(t, r.idem(true, "idem", 9, 0, 1, "new"), 1, 3)
	require.NoError(t, h.b.Close())
	h2 := serveBroker(t, broker.Config{DataDir: dir})
	r2 := openRaw(t, h2, wire.KnownFeatures)
	okAt(t, r2.idem(false, "idem", 9, 0, 2, "new"), 2, 3)
	okAt(t, r2.idem(true, "idem", 9, 1, 3, "newer"), 3, 4)
	sub, err := h2.dial(t).Subscribe(ctxT(t, 10*time.Second), "default", "idem", client.SubscribeOptions{From: client.Earliest()})
	require.NoError(t, err)
	for _, want := range []string{"old 0", "old 1", "old 2", "new", "newer"} {
		ev, err := sub.Next(ctxT(t, 10*time.Second))
		require.NoError(t, err)
		require.Equal(t, want, string(ev.Payload))
	}
}
