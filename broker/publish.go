package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/wire"
)

// publisher is the per-QUIC-stream publish state shared by control and
// publish streams: the authenticated principal, a one-entry stream cache
// (a stream's publishes name the same stream over and over), the sticky
// shard hint, and reusable decode targets.
type publisher struct {
	c         *conn
	principal Principal
	hint      uint32
	lastKey   StreamKey
	last      *stream
	batch     wire.PublishBatch
	acked     wire.AckedPublish
	one       [1][]byte
	// forwarded: the stream's auth advertised wire.CapForwarded (a broker
	// forwarding to us); its publishes for shards we do not own are
	// refused, never forwarded again.
	forwarded bool
	// plain caches the meta of a publish without headers to an in-memory
	// ([0]) and a durable ([1]) stream: it is the same for every publish
	// of the stream's principal, and a publish should not allocate it.
	plain [2]struct {
		meta *batchMeta
		set  bool
	}
}

func newPublisher(c *conn, streamID int64) publisher {
	return publisher{c: c, hint: uint32(c.id)*31 + uint32(streamID)}
}

// resolve checks tenant and permission and finds the stream.
func (p *publisher) resolve(k StreamKey, action auth.Action) (*stream, error) {
	if k.Tenant != p.principal.Tenant() {
		return nil, errTenantMismatch
	}
	if err := p.principal.Check(action, streamResource(k)); err != nil {
		return nil, forbidden(err, action, k.String())
	}
	if p.last != nil && k == p.lastKey && !p.last.deleted.Load() {
		return p.last, nil
	}
	st, err := p.c.b.streams.lookup(k)
	if err != nil {
		return nil, err
	}
	p.c.notePublished(k.String())
	p.lastKey, p.last = k, st
	return st, nil
}

var errTenantMismatch = fmt.Errorf("%w: tenant mismatch", ErrForbidden)

// publishResult is what the answer to a publish carries.
type publishResult struct {
	offset   uint64      // the batch's first record, on success
	noOffset bool        // offset unknown: a forward whose owner did not say
	shard    int         // the shard it went to; -1 before one was picked
	owner    *wire.Owner // the shard's owner, in cluster mode
}

// noShard is the result of a publish refused before it had a shard.
var noShard = publishResult{shard: -1}

// publish hands payloads to the stream's shard: shard when it is >= 0 (a
// shard-addressed publish), else the shard for key (nil: the sticky shard).
// It returns an error without calling done when the publish cannot start
// (draining, tenant, permission, unknown stream or shard); otherwise it
// returns nil and done is called exactly once with the outcome, before
// publish returns for ephemeral streams, from the commit completer goroutine
// for durable ones, from the forwarder for shards of another broker. The
// result's owner is nil in single-broker mode.
//
// Acked publishes wait at most AdmitTimeout for Block subscribers;
// fire-and-forget ones wait as long as the connection lives (backpressure)
// unless IngressDrop selects an immediate, counted drop.
//
// headers (nil for none) holds each payload's header block.
func (p *publisher) publish(k StreamKey, key []byte, shard int, payloads, headers [][]byte, acked bool, done func(publishResult, error)) error {
	sh, r, err := p.begin(k, key, shard, p.hint)
	if err != nil {
		return err
	}
	res := publishResult{shard: sh.id}
	if r != nil {
		if !r.self {
			p.forward(r, payloads, headers, acked, done)
			return nil
		}
		res.owner = &r.owner
	}
	meta := p.meta(sh.st.spec.Durable, headers)
	p.local(sh, res, payloads, acked, done, func(admit context.Context, done func(uint64, error)) {
		sh.publish(admit, payloads, meta, nil, done)
	})
	return nil
}

// meta is the meta a publish of this stream carries (batchmeta.go).
func (p *publisher) meta(durable bool, headers [][]byte) *batchMeta {
	if headers != nil {
		return p.c.b.metaFor(durable, p.subject(), headers)
	}
	i := 0
	if durable {
		i = 1
	}
	if !p.plain[i].set {
		p.plain[i].meta, p.plain[i].set = p.c.b.metaFor(durable, p.subject(), nil), true
	}
	return p.plain[i].meta
}

// subject is the publishing principal a batch records: none for a stream
// a broker forwards on, whose credential is the broker's, not the
// publisher's.
func (p *publisher) subject() string {
	if p.forwarded {
		return ""
	}
	return subjectOf(p.principal)
}

// begin does what every publish does first: it counts the publish in
// flight, then checks draining, the tenant, the permission, the stream and
// the shard (hint picks an unkeyed, unaddressed one), and routes it. On an
// error nothing stays in flight; otherwise the caller's done ends it.
func (p *publisher) begin(k StreamKey, key []byte, shard int, hint uint32) (*shard, *route, error) {
	b := p.c.b
	// Drain waits for inflight to reach zero after setting draining, so a
	// publish either sees draining or is waited for until done: none can
	// reach a subscriber queue after that queue was flushed, and be acked.
	b.inflight.Add(1)
	if b.draining.Load() {
		b.inflight.Add(-1)
		return nil, nil, ErrDraining
	}
	st, err := p.resolve(k, auth.ActionPublish)
	if err != nil {
		b.inflight.Add(-1)
		return nil, nil, err
	}
	sh, err := st.pick(key, shard, hint)
	if err != nil {
		b.inflight.Add(-1)
		return nil, nil, err
	}
	r, err := b.routeOf(k, sh.id)
	if err != nil {
		b.inflight.Add(-1)
		return nil, nil, err
	}
	return sh, r, nil
}

// local runs a publish on a shard this broker serves: run appends it (with
// an admission context bounding how long it may wait for Block
// subscribers), then the outcome is counted and answered, and the publish
// leaves the in-flight count.
func (p *publisher) local(sh *shard, res publishResult, payloads [][]byte, acked bool, done func(publishResult, error),
	run func(admit context.Context, done func(uint64, error))) {
	b := p.c.b
	admit := p.c.ctx
	switch {
	case b.cfg.Queue.Policy != fanout.Block:
		// Only Block subscribers can make a publish wait; skip the timer.
	case acked:
		var cancel context.CancelFunc
		admit, cancel = context.WithTimeout(p.c.ctx, b.cfg.AdmitTimeout)
		defer cancel() // admission completes before run returns
	case b.cfg.IngressDrop:
		admit = expired
	}
	var start time.Time
	if acked {
		start = time.Now()
	}
	events := len(payloads)
	bytes := payloadBytes(payloads)
	st := sh.st
	run(admit, func(base uint64, err error) {
		b.metrics.published(events, bytes, acked, err)
		st.m.published(events, bytes, err)
		if err == nil {
			sh.bytesIn.Add(uint64(bytes))
			sh.eventsIn.Add(uint64(events))
		}
		if acked {
			d := time.Since(start).Seconds()
			b.metrics.ackLatency.Observe(d)
			st.m.ackLatency.Observe(d)
		}
		out := res // res stays unmodified, so the closure holds it by value
		out.offset = base
		var nl *notLeaderError
		if errors.As(err, &nl) {
			out.owner = nl.owner() // a replica's leadership moved under the publish
		}
		done(out, err)
		b.inflight.Add(-1)
	})
}

func payloadBytes(payloads [][]byte) int {
	n := 0
	for _, p := range payloads {
		n += len(p)
	}
	return n
}

// expired is an already-cancelled context: an admission that must not wait.
var expired = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
