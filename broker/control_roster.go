package broker

import (
	"context"
	"fmt"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/wire"
)

// requireCap refuses a request of an optional feature whose capability bit
// the client did not advertise: it could not parse the replies.
func (ct *control) requireCap(bit wire.Flags, what string) bool {
	if wire.Supports(ct.peer, bit) {
		return true
	}
	ct.fail(fmt.Errorf("%w: %s needs capability 0x%04x in auth client_caps", ErrNotNegotiated, what, bit.Caps()))
	return false
}

// rosterScope checks the tenant and the action on the roster, and the
// names. A refusal is sent here; keep=false means the stream ends
// (authorisation), keep=true that it goes on.
func (ct *control) rosterScope(tenant, ns, name string, action auth.Action) (r *roster, keep bool) {
	k := rosterKey{Tenant: tenant, Namespace: ns, Roster: name}
	if err := validateRosterKey(k); err != nil {
		ct.fail(err)
		return nil, true
	}
	if err := ct.authorize(k.Tenant, action, rosterResource(k)); err != nil {
		ct.fail(err)
		return nil, false
	}
	return ct.broker().rosters.get(k), true
}

func (ct *control) rosterJoin(m *wire.RosterJoin) bool {
	if !ct.requireCap(wire.CapRoster, "roster_join") {
		return true
	}
	r, keep := ct.rosterScope(m.TenantID, m.Namespace, m.Roster, auth.ActionRosterJoin)
	if r == nil {
		return keep
	}
	if err := validRosterName("member", m.Member, maxMemberBytes); err != nil {
		ct.fail(err)
		return true
	}
	if len(m.Metadata) > maxMetadataBytes {
		ct.fail(fmt.Errorf("%w: metadata is %d bytes, max %d", ErrInvalidRequest, len(m.Metadata), maxMetadataBytes))
		return true
	}
	// Record ownership first: if the connection closes right after the
	// join, endExtras sees the membership and the member leaves.
	ct.c.noteJoined(membership{r: r, member: m.Member})
	r.join(ct.c.pool(), ct.c, m.Member, m.Metadata)
	if ct.c.ctx.Err() != nil { // closed meanwhile: endExtras may have run
		r.leave(ct.c.pool(), ct.c, m.Member)
	}
	ct.rosterOK(m.RequestID)
	return true
}

func (ct *control) rosterLeave(m *wire.RosterLeave) bool {
	if !ct.requireCap(wire.CapRoster, "roster_leave") {
		return true
	}
	r, keep := ct.rosterScope(m.TenantID, m.Namespace, m.Roster, auth.ActionRosterJoin)
	if r == nil {
		return keep
	}
	if !r.leave(ct.c.pool(), nil, m.Member) {
		ct.fail(fmt.Errorf("%w: %q is not a member of roster %s", ErrInvalidRequest, m.Member, r.key))
		return true
	}
	ct.c.noteLeft(membership{r: r, member: m.Member})
	ct.rosterOK(m.RequestID)
	return true
}

func (ct *control) rosterOK(id *uint64) {
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, &wire.RosterOK{RequestID: id}) })
}

// rosterWatch registers a watch (snapshot and registration under the
// roster lock), opens its event stream, answers subscribed and starts the
// writer, which sends the snapshot and then the changes.
func (ct *control) rosterWatch(m *wire.RosterWatch) bool {
	if !ct.requireCap(wire.CapRoster, "roster_watch") {
		return true
	}
	r, keep := ct.rosterScope(m.TenantID, m.Namespace, m.Roster, auth.ActionRosterWatch)
	if r == nil {
		return keep
	}
	// Roster changes are applied under the roster lock, so a watcher queue
	// must never make them wait: DropNew whatever the broker's policy.
	q, err := fanout.NewQueue(fanout.Config{Capacity: ct.broker().cfg.Queue.Capacity, Policy: fanout.DropNew})
	if err != nil {
		ct.fail(err)
		return true
	}
	ctx, cancel := context.WithCancel(ct.c.ctx)
	w := &rosterWatch{id: ct.broker().nextSubID.Add(1), r: r, conn: ct.c, queue: q, ctx: ctx, cancel: cancel}
	if err := ct.c.addExtra(w.id, w); err != nil {
		cancel()
		q.Close()
		ct.fail(err)
		return true
	}
	r.watch(w)
	out, err := ct.openEventStream(ctx, w.id)
	if err != nil {
		w.end()
		return true
	}
	w.out = out
	// A watcher that stops reading ends the watch now, not at its next
	// change: the stream's context ends on the peer's STOP_SENDING.
	context.AfterFunc(out.Context(), cancel)
	ct.replySubscribed(ctx, w.id, w.run)
	return true
}

// openEventStream opens a broker-initiated unidirectional stream and writes
// its event_stream_hello; failures are reported on the control stream.
func (ct *control) openEventStream(ctx context.Context, id uint64) (*quic.SendStream, error) {
	octx, cancel := context.WithTimeout(ctx, openStreamTimeout)
	out, err := ct.c.qc.OpenUniStreamSync(octx)
	cancel()
	if err != nil {
		ct.fail(fmt.Errorf("cannot open event stream: %w", err))
		return nil, err
	}
	if _, err := out.Write(wire.AppendJSONFrame(nil, &wire.EventStreamHello{SubscriptionID: id})); err != nil {
		out.CancelWrite(streamErrSubscriptionEnded)
		return nil, err
	}
	return out, nil
}
