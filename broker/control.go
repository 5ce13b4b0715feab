package broker

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

// ServerFlags are the frame flags and capabilities this broker advertises
// in auth_ok; with wire.CapForwarded it tells a forwarding broker that
// forwarded publishes are never forwarded again, with wire.CapRaft that it
// takes replication streams.
const ServerFlags = wire.KnownCapabilities | wire.CapForwarded | wire.CapRaft

// ServerFeatures are the published feature bits this broker advertises:
// producer_init and idempotent publishes, typed errors, sequence_reused,
// stream_shards, conditional cache writes, offset_for_time, and, on a
// broker with durable storage, consumer groups (wire.GroupFeatures).
const ServerFeatures = wire.KnownFeatures

// control serves one client-opened bidirectional stream: auth, then any mix
// of publishes and subscribes, with replies through one replyWriter.
type control struct {
	publisher
	str  *quic.Stream
	fr   *frameio.Reader
	out  *replyWriter
	peer wire.Flags // frame flags and capabilities the client advertised
	// features are the published feature bits the client offered
	// (wire.FeatureErrorCodes, wire.FeatureSequenceReused, ...).
	features wire.Features
	// ownerAcks: the client advertised wire.CapOwner, so acks and
	// not_owner refusals name the shard's owner (in cluster mode).
	ownerAcks bool
	log       *slog.Logger
	// oneShot is set by a cache request without request_id: its reply is
	// the last thing the stream carries (cache_control.go).
	oneShot bool
	// stopExpiry disarms the end of the stream at the token's expiry;
	// expired is set when it fired.
	stopExpiry func()
	expired    atomic.Bool
	// async counts answers still owed on their own goroutines (group
	// polls waiting for records): a client that finishes its side gets
	// them before the stream ends.
	async sync.WaitGroup
}

func newControl(c *conn, str *quic.Stream) *control {
	return &control{
		publisher:  newPublisher(c, int64(str.StreamID())),
		str:        str,
		stopExpiry: func() {},
		fr:         c.frameReader(str),
		log:        c.b.log.With("conn", c.id, "stream", int64(str.StreamID())),
	}
}

func (ct *control) serve() {
	ct.out = newReplyWriter(ct.str)
	defer func() { ct.stopExpiry(); ct.fr.Release() }()
	authed := ct.authenticate()
	ct.c.releasePreAuthSlot()
	if authed && wire.Supports(ct.peer, wire.CapRaft) {
		ct.serveRaft()
		ct.out.close()
		ct.str.CancelRead(0)
		ct.str.Close()
		return
	}
	if authed && ct.loop() {
		// The client finished its side (or a one-shot request was
		// answered): flush replies, then finish ours.
		ct.async.Wait()
		ct.out.close()
		ct.str.Close()
		if ct.oneShot {
			ct.str.CancelRead(0) // whatever the client sends after it is not read
		}
		return
	}
	ct.out.close()
	ct.str.CancelRead(streamErrProtocol)
	ct.str.Close()
}

// expire ends the stream when its token expires: an error reply that says
// so, then the read side stopped with the auth code, which ends loop.
func (ct *control) expire() {
	ct.expired.Store(true)
	m := &wire.ErrorMessage{Message: errTokenExpired.Error(), Err: ct.typed(errTokenExpired)}
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, m) })
	ct.str.CancelRead(streamErrAuth)
}

// fail sends an error reply, with its typed code for a client that
// negotiated them; the caller decides whether the stream ends. A refused
// request (unknown stream, no rights, not the owner) is not a violation:
// the client asked properly and got its answer.
func (ct *control) fail(err error) {
	m := &wire.ErrorMessage{Message: err.Error(), Err: ct.typed(err)}
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, m) })
}

// violate is fail for frames no correct client sends (broken framing,
// unknown kinds or flags, a message out of place): those alone count as
// protocol violations, so an alert on the count means a broken peer.
func (ct *control) violate(err error) {
	ct.c.b.metrics.protocolViolation("control")
	ct.log.Debug("protocol violation", "err", err)
	ct.fail(err)
}

// typed is err's typed error for a client that negotiated
// wire.FeatureErrorCodes, else nil.
func (ct *control) typed(err error) *wire.TypedError {
	if !ct.features.Has(wire.FeatureErrorCodes) {
		return nil
	}
	return typedError(err)
}

// authenticate reads the mandatory first frame. It replies auth_ok with the
// server's capabilities when the client offered client_flags, else plain ok
// (the client then assumes the original v1 flags).
func (ct *control) authenticate() bool {
	ct.str.SetReadDeadline(time.Now().Add(ct.c.b.cfg.AuthTimeout))
	h, payload, err := ct.fr.Next()
	ct.str.SetReadDeadline(time.Time{})
	if err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			ct.c.b.metrics.authTimeouts.Inc()
			ct.fail(refusal(wire.CodeUnauthenticated, "auth required within "+ct.c.b.cfg.AuthTimeout.String()))
		case errors.Is(err, wire.ErrFrameTooLarge), errors.Is(err, frameio.ErrBudget):
			ct.violate(refusal(wire.CodeUnauthenticated, "auth required: "+err.Error()))
		case !errors.Is(err, io.EOF) && !peerGone(err):
			ct.violate(errAuthRequired)
		}
		return false
	}
	m, err := decodeJSON(h, payload)
	auth, ok := m.(*wire.Auth)
	if err != nil || !ok {
		ct.violate(errAuthRequired)
		return false
	}
	ct.features = wire.PeerFeatures(auth.ClientFeatures)
	p, err := ct.c.b.verify(ct.c.ctx, auth)
	if err != nil {
		ct.c.b.authRefused(ct.c.id, auth, err)
		ct.fail(err)
		return false
	}
	ct.principal = p
	ct.c.authenticated(ct.fr)
	ct.stopExpiry = atExpiry(p, ct.expire)
	ct.peer = wire.PeerSet(auth.ClientFlags, auth.ClientCaps)
	ct.ownerAcks = wire.Supports(ct.peer, wire.CapOwner)
	ct.forwarded = wire.Supports(ct.peer, wire.CapForwarded)
	ct.c.noteAuth(p, ct.forwarded)
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, authReply(auth, ct.c.b.cfg.DataDir != "")) })
	return true
}

// authReply is auth_ok with this broker's words, each sent only when the
// client sent its own (plain ok without client_flags, as wire v1 says).
func authReply(auth *wire.Auth, durable bool) wire.Message {
	if auth.ClientFlags == nil {
		return &wire.OK{}
	}
	ok := &wire.AuthOK{ServerFlags: ServerFlags.FrameFlags()}
	if auth.ClientFeatures != nil {
		f := ServerFeatures
		if !durable {
			// A group's position would not survive a restart.
			f &^= wire.GroupFeatures
		}
		w := uint32(f)
		ok.ServerFeatures = &w
	}
	if auth.ClientCaps != nil {
		caps := ServerFlags.Caps()
		ok.ServerCaps = &caps
	}
	return ok
}

func decodeJSON(h wire.Header, payload []byte) (wire.Message, error) {
	if h.Flags != 0 {
		return nil, errNotJSON
	}
	return wire.DecodeJSON(payload)
}

var (
	errNotJSON      = errors.New("not a JSON frame")
	errAuthRequired = refusal(wire.CodeUnauthenticated, "auth required")
)

// loop dispatches frames until the client finishes the stream (true) or a
// violation ends it (false).
func (ct *control) loop() bool {
	for {
		h, payload, err := ct.fr.Next()
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return true
		case wire.IsFlagsError(err):
			// The payload was consumed: report and go on, as the published
			// broker does.
			ct.violate(refusal(wire.CodeInvalidRequest, "unsupported frame flags"))
			continue
		case err != nil && ct.expired.Load():
			return false // expire already said why
		case errors.Is(err, frameio.ErrBudget):
			ct.fail(fmt.Errorf("%w: %w", ErrLimitExceeded, err))
			return false
		case peerGone(err):
			return false // nobody is left to tell
		case err != nil:
			ct.violate(fmt.Errorf("malformed frame: %w", err))
			return false
		}
		if !ct.dispatch(h, payload) {
			return false
		}
		if ct.oneShot {
			return true
		}
	}
}

// dispatch handles one frame; false ends the stream.
func (ct *control) dispatch(h wire.Header, payload []byte) bool {
	switch h.Kind() {
	case wire.KindJSON:
		m, err := wire.DecodeJSON(payload)
		if err != nil {
			ct.violate(fmt.Errorf("malformed message: %w", err))
			return true
		}
		return ct.handleJSON(m)
	case wire.KindPublishBatch:
		return ct.binaryPublish(h.Flags, payload)
	case wire.KindAckedPublishBatch:
		return ct.binaryAckedPublish(h.Flags, payload)
	}
	ct.violate(refusal(wire.CodeInvalidRequest, "unexpected frame kind "+h.Kind().String()))
	return true
}

func (ct *control) handleJSON(m wire.Message) bool {
	switch m := m.(type) {
	case *wire.Publish:
		ct.one[0] = m.Payload
		return ct.jsonPublish(streamKey(m.TenantID, m.Namespace, m.Stream), m.Key, shardArg(m.Shard), ct.one[:], m.RequestID, m.Ack, wire.AckPerMessage)
	case *wire.PublishBatchMessage:
		return ct.jsonPublish(streamKey(m.TenantID, m.Namespace, m.Stream), m.Key, shardArg(m.Shard), m.Payloads, m.RequestID, m.Ack, wire.AckPerBatch)
	case *wire.PublishIdempotent:
		return ct.idempotentPublish(streamKey(m.TenantID, m.Namespace, m.Stream), m.Key, shardArg(m.Shard), m.Payloads, nil,
			m.RequestID, m.ProducerID, m.Sequence)
	case *wire.ProducerInit:
		return ct.producerInit(m)
	case *wire.StreamShards:
		return ct.streamShards(m)
	case *wire.OffsetForTime:
		return ct.offsetForTime(m)
	case *wire.Subscribe:
		return ct.subscribe(m)
	case *wire.RosterJoin:
		return ct.rosterJoin(m)
	case *wire.RosterLeave:
		return ct.rosterLeave(m)
	case *wire.RosterWatch:
		return ct.rosterWatch(m)
	case *wire.QueueConsume:
		return ct.queueConsume(m)
	case *wire.QueueAck:
		return ct.queueAck(m)
	case *wire.QueueNack:
		return ct.queueNack(m)
	case *wire.Auth:
		ct.violate(refusal(wire.CodeInvalidRequest, "auth already established"))
		return false
	}
	if handled, keep := ct.handleCache(m); handled {
		return keep
	}
	if handled, keep := ct.handleGroup(m); handled {
		return keep
	}
	ct.violate(refusal(wire.CodeInvalidRequest, "unexpected message type "+m.Type().String()))
	return true
}

func streamKey(t, ns, s string) StreamKey { return StreamKey{Tenant: t, Namespace: ns, Stream: s} }

// jsonPublish handles publish and publish_batch. On a control stream an
// absent ack means acked (the published broker's behaviour), and an acked
// publish needs a request_id to be answerable.
func (ct *control) jsonPublish(k StreamKey, key []byte, shard int, payloads [][]byte, reqID *uint64, ack *wire.AckMode, def wire.AckMode) bool {
	mode := def
	if ack != nil {
		mode = *ack
	}
	acked := mode != wire.AckNone
	if acked && reqID == nil {
		ct.violate(refusal(wire.CodeInvalidRequest, "missing request_id for acked publish"))
		return true
	}
	if !acked {
		return ct.publishUnacked(k, key, shard, payloads, nil)
	}
	id := *reqID
	reply := func(res publishResult, err error) {
		ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, ct.jsonAnswer(id, res, err)) })
	}
	if err := ct.publish(k, key, shard, payloads, nil, true, reply); err != nil {
		reply(noShard, err)
		return !errors.Is(err, ErrForbidden)
	}
	return true
}

// publishUnacked starts a fire-and-forget publish. A failure cannot be
// answered per request, so the stream gets an uncorrelated error message
// (whenever the outcome is known); authorisation failures end the stream.
func (ct *control) publishUnacked(k StreamKey, key []byte, shard int, payloads, headers [][]byte) bool {
	err := ct.publish(k, key, shard, payloads, headers, false, func(_ publishResult, err error) {
		if err != nil {
			ct.fail(err)
		}
	})
	return ct.unackedResult(err)
}

// unackedResult reports a failed fire-and-forget publish: it cannot be
// answered per request, so the stream gets an error message; authorisation
// failures end the stream.
func (ct *control) unackedResult(err error) bool {
	if err == nil {
		return true
	}
	ct.fail(err)
	return !errors.Is(err, ErrForbidden)
}

func (ct *control) binaryPublish(flags wire.Flags, payload []byte) bool {
	if err := wire.DecodePublishBatchFlags(flags, payload, &ct.batch); err != nil {
		ct.violate(fmt.Errorf("malformed publish batch: %w", err))
		return true
	}
	b := &ct.batch
	return ct.publishUnacked(streamKey(b.TenantID, b.Namespace, b.Stream), batchKey(b), batchShard(b), b.Payloads, b.Headers)
}

// shardArg is the publish's explicit shard, -1 for none; a value past
// MaxShards stays out of range.
func shardArg(s *uint32) int {
	if s == nil {
		return -1
	}
	return int(min(*s, MaxShards))
}

func batchShard(b *wire.PublishBatch) int {
	if !b.HasShard {
		return -1
	}
	return int(min(b.Shard, MaxShards))
}

// batchKey is a keyed publish's key, nil for none (an empty key is a key).
func batchKey(b *wire.PublishBatch) []byte {
	if !b.HasKey {
		return nil
	}
	if b.Key == nil {
		return []byte{}
	}
	return b.Key
}

// binaryAckedPublish answers with a binary ack. The request id is decoded
// before the body so that even a malformed body gets a correlated error ack.
func (ct *control) binaryAckedPublish(flags wire.Flags, payload []byte) bool {
	derr := wire.DecodeAckedPublishFlags(flags, payload, &ct.acked)
	if derr != nil && len(payload) < 8 { // no request_id to answer
		ct.violate(fmt.Errorf("malformed publish batch: %w", derr))
		return true
	}
	id := ct.acked.RequestID
	reply := func(res publishResult, err error) {
		ack := ct.binaryAnswer(id, res, err)
		ct.out.send(func(b []byte) []byte {
			out, aerr := wire.AppendPublishAckFrame(b, ack)
			if aerr != nil { // a message over 64 KiB: send it cut
				ack.Message = ack.Message[:1024]
				out, _ = wire.AppendPublishAckFrame(b, ack)
			}
			return out
		})
	}
	if derr != nil {
		err := fmt.Errorf("malformed publish batch: %w", derr)
		if flags&wire.FlagPublishIdempotent != 0 { // answered in JSON, as every idempotent batch
			ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, ct.jsonAnswer(id, noShard, err)) })
			return true
		}
		reply(noShard, err)
		return true
	}
	pb := &ct.acked.PublishBatch
	if ct.acked.Idempotent {
		return ct.idempotentPublish(streamKey(pb.TenantID, pb.Namespace, pb.Stream), batchKey(pb), batchShard(pb), pb.Payloads, pb.Headers,
			id, ct.acked.ProducerID, ct.acked.Sequence)
	}
	if err := ct.publish(streamKey(pb.TenantID, pb.Namespace, pb.Stream), batchKey(pb), batchShard(pb), pb.Payloads, pb.Headers, true, reply); err != nil {
		reply(noShard, err)
		return !errors.Is(err, ErrForbidden)
	}
	return true
}

// broker is the broker this stream's connection belongs to.
func (ct *control) broker() *Broker { return ct.c.b }
