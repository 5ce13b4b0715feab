package broker

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

// ServerFlags are the capabilities this broker advertises in auth_ok; with
// wire.CapForwarded it tells a forwarding broker that forwarded publishes
// are never forwarded again.
const ServerFlags = wire.KnownCapabilities | wire.CapForwarded

// control serves one client-opened bidirectional stream: auth, then any mix
// of publishes and subscribes, with replies through one replyWriter.
type control struct {
	publisher
	str  *quic.Stream
	fr   *frameio.Reader
	out  *replyWriter
	peer wire.Flags // capabilities the client advertised
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
}

func newControl(c *conn, str *quic.Stream) *control {
	return &control{
		publisher:  newPublisher(c, int64(str.StreamID())),
		str:        str,
		stopExpiry: func() {},
		fr:         frameio.NewReader(str, c.b.cfg.MaxFrameBytes),
		log:        c.b.log.With("conn", c.id, "stream", int64(str.StreamID())),
	}
}

func (ct *control) serve() {
	ct.out = newReplyWriter(ct.str)
	defer func() { ct.stopExpiry() }()
	if ct.authenticate() && ct.loop() {
		// The client finished its side (or a one-shot request was
		// answered): flush replies, then finish ours.
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
	ct.out.send(func(b []byte) []byte {
		return wire.AppendJSONFrame(b, &wire.ErrorMessage{Message: errTokenExpired.Error()})
	})
	ct.str.CancelRead(streamErrAuth)
}

// fail sends an error reply; the caller decides whether the stream ends.
func (ct *control) fail(msg string) {
	ct.c.b.metrics.protocolViolation("control")
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, &wire.ErrorMessage{Message: msg}) })
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
			ct.fail("auth required within " + ct.c.b.cfg.AuthTimeout.String())
		case !errors.Is(err, io.EOF):
			ct.fail("auth required")
		}
		return false
	}
	m, err := decodeJSON(h, payload)
	auth, ok := m.(*wire.Auth)
	if err != nil || !ok {
		ct.fail("auth required")
		return false
	}
	p, err := ct.c.b.verify(ct.c.ctx, auth)
	if err != nil {
		ct.c.b.log.Info("auth refused", "conn", ct.c.id, "tenant", auth.TenantID, "err", err)
		ct.fail(err.Error())
		return false
	}
	ct.principal = p
	ct.stopExpiry = atExpiry(p, ct.expire)
	ct.peer = wire.PeerFlags(auth.ClientFlags)
	ct.ownerAcks = wire.Supports(ct.peer, wire.CapOwner)
	ct.forwarded = wire.Supports(ct.peer, wire.CapForwarded)
	ct.c.noteAuth(p, ct.forwarded)
	ct.out.send(func(b []byte) []byte {
		if auth.ClientFlags == nil {
			return wire.AppendJSONFrame(b, &wire.OK{})
		}
		return wire.AppendJSONFrame(b, &wire.AuthOK{ServerFlags: uint16(ServerFlags)})
	})
	return true
}

func decodeJSON(h wire.Header, payload []byte) (wire.Message, error) {
	if h.Flags != 0 {
		return nil, errNotJSON
	}
	return wire.DecodeJSON(payload)
}

var errNotJSON = errors.New("not a JSON frame")

// loop dispatches frames until the client finishes the stream (true) or a
// violation ends it (false).
func (ct *control) loop() bool {
	for {
		h, payload, err := ct.fr.Next()
		var flagsErr *wire.FlagsError
		switch {
		case errors.Is(err, io.EOF):
			return true
		case errors.As(err, &flagsErr):
			// The payload was consumed: report and go on, as the published
			// broker does.
			ct.fail("unsupported frame flags")
			continue
		case err != nil && ct.expired.Load():
			return false // expire already said why
		case err != nil:
			ct.fail("malformed frame: " + err.Error())
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
			ct.fail("malformed message: " + err.Error())
			return true
		}
		return ct.handleJSON(m)
	case wire.KindPublishBatch:
		return ct.binaryPublish(h.Flags, payload)
	case wire.KindAckedPublishBatch:
		return ct.binaryAckedPublish(h.Flags, payload)
	}
	ct.fail("unexpected frame kind " + h.Kind().String())
	return true
}

func (ct *control) handleJSON(m wire.Message) bool {
	switch m := m.(type) {
	case *wire.Publish:
		ct.one[0] = m.Payload
		return ct.jsonPublish(streamKey(m.TenantID, m.Namespace, m.Stream), m.Key, shardArg(m.Shard), ct.one[:], m.RequestID, m.Ack, wire.AckPerMessage)
	case *wire.PublishBatchMessage:
		return ct.jsonPublish(streamKey(m.TenantID, m.Namespace, m.Stream), m.Key, shardArg(m.Shard), m.Payloads, m.RequestID, m.Ack, wire.AckPerBatch)
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
		ct.fail("auth already established")
		return false
	}
	if handled, keep := ct.handleCache(m); handled {
		return keep
	}
	ct.fail("unexpected message type " + m.Type().String())
	return true
}

func streamKey(t, ns, s string) StreamKey { return StreamKey{Tenant: t, Namespace: ns, Stream: s} }

// jsonPublish handles publish and publish_batch. On a control stream an
// absent ack means acked (the published broker's behaviour), and an acked
// publish needs a request_id to be answerable.
func (ct *control) jsonPublish(k StreamKey, key *string, shard int, payloads [][]byte, reqID *uint64, ack *wire.AckMode, def wire.AckMode) bool {
	mode := def
	if ack != nil {
		mode = *ack
	}
	acked := mode != wire.AckNone
	if acked && reqID == nil {
		ct.fail("missing request_id for acked publish")
		return true
	}
	if !acked {
		return ct.publishUnacked(k, keyBytes(key), shard, payloads)
	}
	id := *reqID
	reply := func(_ uint64, own *wire.Owner, err error) {
		if !ct.ownerAcks {
			own = nil
		}
		ct.out.send(func(b []byte) []byte {
			if err != nil {
				return wire.AppendJSONFrame(b, &wire.PublishError{RequestID: id, Message: err.Error(), Owner: own})
			}
			return wire.AppendJSONFrame(b, &wire.PublishOK{RequestID: id, Owner: own})
		})
	}
	if err := ct.publish(k, keyBytes(key), shard, payloads, true, reply); err != nil {
		reply(0, nil, err)
		return !errors.Is(err, ErrForbidden)
	}
	return true
}

// publishUnacked starts a fire-and-forget publish. A failure cannot be
// answered per request, so the stream gets an uncorrelated error message
// (whenever the outcome is known); authorisation failures end the stream.
func (ct *control) publishUnacked(k StreamKey, key []byte, shard int, payloads [][]byte) bool {
	err := ct.publish(k, key, shard, payloads, false, func(_ uint64, _ *wire.Owner, err error) {
		if err != nil {
			ct.fail(err.Error())
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
	ct.fail(err.Error())
	return !errors.Is(err, ErrForbidden)
}

func (ct *control) binaryPublish(flags wire.Flags, payload []byte) bool {
	if err := wire.DecodePublishBatchFlags(flags, payload, &ct.batch); err != nil {
		ct.fail("malformed publish batch: " + err.Error())
		return true
	}
	b := &ct.batch
	return ct.publishUnacked(streamKey(b.TenantID, b.Namespace, b.Stream), nil, batchShard(b), b.Payloads)
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

// binaryAckedPublish answers with a binary ack. The request id is decoded
// before the body so that even a malformed body gets a correlated error ack.
func (ct *control) binaryAckedPublish(flags wire.Flags, payload []byte) bool {
	derr := wire.DecodeAckedPublishFlags(flags, payload, &ct.acked)
	if derr != nil && len(payload) < 8 { // no request_id to answer
		ct.fail("malformed publish batch: " + derr.Error())
		return true
	}
	id := ct.acked.RequestID
	reply := func(_ uint64, own *wire.Owner, err error) {
		ack := wire.PublishAck{Status: wire.AckOK, RequestID: id}
		if own != nil && ct.ownerAcks {
			ack.Owner, ack.HasOwner = *own, true
		}
		if err != nil {
			ack.Status, ack.Message = wire.AckError, err.Error()
		}
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
		reply(0, nil, errors.New("malformed publish batch: "+derr.Error()))
		return true
	}
	pb := &ct.acked.PublishBatch
	if err := ct.publish(streamKey(pb.TenantID, pb.Namespace, pb.Stream), nil, batchShard(pb), pb.Payloads, true, reply); err != nil {
		reply(0, nil, err)
		return !errors.Is(err, ErrForbidden)
	}
	return true
}

// broker is the broker this stream's connection belongs to.
func (ct *control) broker() *Broker { return ct.c.b }
