package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/felixmq/felix/wire"
)

// Roster is a handle on one roster (namespace/roster of the client's
// tenant) over its own control stream. Members joined through it belong to
// the Client's connection: they leave when Leave is called or when the
// connection closes (Client.Close, a crash, a stall), not when the Roster
// handle is closed. Safe for concurrent use; requests are serialised.
type Roster struct {
	c         *Client
	namespace string
	name      string

	mu     sync.Mutex // one request in flight on ct
	ct     *control
	nextID uint64
	err    error // terminal: the control stream is out of step
}

// RosterMember is a member and its metadata.
type RosterMember struct {
	Member   string
	Metadata []byte
}

// Roster opens a handle on namespace/name. It fails with ErrProtocol when
// the broker does not speak rosters (capability 0x0100).
func (c *Client) Roster(ctx context.Context, namespace, name string) (*Roster, error) {
	ct, err := c.openControl(ctx)
	if err != nil {
		return nil, err
	}
	if !wire.Supports(ct.flags, wire.CapRoster) {
		ct.str.CancelWrite(0)
		ct.str.CancelRead(0)
		return nil, fmt.Errorf("%w: the broker does not support rosters (capability 0x0100)", ErrProtocol)
	}
	return &Roster{c: c, namespace: namespace, name: name, ct: ct}, nil
}

// Join adds member with metadata (nil: none), or replaces the metadata of a
// member already present, and waits for the broker's answer.
func (r *Roster) Join(ctx context.Context, member string, metadata []byte) error {
	return r.request(ctx, func(id *uint64) wire.Message {
		return &wire.RosterJoin{TenantID: r.c.cfg.Tenant, Namespace: r.namespace, Roster: r.name,
			Member: member, Metadata: metadata, RequestID: id}
	})
}

// Leave removes member; a member that is not present is a *BrokerError.
func (r *Roster) Leave(ctx context.Context, member string) error {
	return r.request(ctx, func(id *uint64) wire.Message {
		return &wire.RosterLeave{TenantID: r.c.cfg.Tenant, Namespace: r.namespace, Roster: r.name, Member: member, RequestID: id}
	})
}

func (r *Roster) request(ctx context.Context, build func(*uint64) wire.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.nextID++
	id := r.nextID
	if _, err := r.ct.str.Write(wire.AppendJSONFrame(nil, build(&id))); err != nil {
		r.err = r.ct.sess.wrap(fmt.Errorf("client: roster request: %w", err))
		return r.err
	}
	m, err := r.ct.readJSON(ctx)
	if err != nil {
		r.err = err // the reply may still come: the stream is out of step
		return err
	}
	switch m := m.(type) {
	case *wire.RosterOK:
		if m.RequestID == nil || *m.RequestID != id {
			r.err = fmt.Errorf("%w: roster_ok for another request", ErrProtocol)
			return r.err
		}
		return nil
	case *wire.ErrorMessage:
		return brokerError(m.Message, m.Err, m.Owner)
	}
	r.err = fmt.Errorf("%w: %s in reply to a roster request", ErrProtocol, m.Type())
	return r.err
}

// Close closes the handle's control stream. Members it joined stay until
// Leave or the connection closes.
func (r *Roster) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = ErrClosed
	}
	r.ct.str.Close()
	r.ct.str.CancelRead(0)
	return nil
}

// RosterEventKind says what a RosterEvent is.
type RosterEventKind uint8

const (
	// RosterSnapshotEvent: Members is the complete set when the watch began.
	RosterSnapshotEvent RosterEventKind = iota + 1
	// RosterJoinEvent: Member joined (or changed its metadata).
	RosterJoinEvent
	// RosterLeaveEvent: Member left.
	RosterLeaveEvent
	// RosterGapEvent: the broker dropped Dropped changes for this slow
	// watcher; the state is no longer exact: close and watch again.
	RosterGapEvent
)

// RosterEvent is one item of a roster watch.
type RosterEvent struct {
	Kind    RosterEventKind
	Members []RosterMember // RosterSnapshotEvent
	Member  RosterMember   // RosterJoinEvent, RosterLeaveEvent (no metadata)
	Dropped uint64         // RosterGapEvent
}

// RosterWatch follows a roster: first one snapshot event, then joins and
// leaves in the order the broker applied them, with nothing missed or
// repeated between the snapshot and the first change.
type RosterWatch struct {
	js       *jsonStream
	snapshot []RosterMember
}

// Watch starts a watch of the roster on its own streams.
func (r *Roster) Watch(ctx context.Context) (*RosterWatch, error) {
	js, ct, err := r.c.openJSONStream(ctx, &wire.RosterWatch{TenantID: r.c.cfg.Tenant, Namespace: r.namespace, Roster: r.name})
	if err != nil {
		return nil, err
	}
	ct.str.Close()
	ct.str.CancelRead(0)
	return &RosterWatch{js: js}, nil
}

// Next returns the next event; the snapshot (which may span several
// frames) is returned whole as the first.
func (w *RosterWatch) Next(ctx context.Context) (RosterEvent, error) {
	for {
		m, err := w.js.receive(ctx)
		if err != nil {
			return RosterEvent{}, err
		}
		switch m := m.(type) {
		case *wire.RosterSnapshot:
			for _, mb := range m.Members {
				w.snapshot = append(w.snapshot, RosterMember{Member: mb.Member, Metadata: mb.Metadata})
			}
			if !m.Last {
				continue
			}
			ev := RosterEvent{Kind: RosterSnapshotEvent, Members: w.snapshot}
			if ev.Members == nil {
				ev.Members = []RosterMember{}
			}
			w.snapshot = nil
			return ev, nil
		case *wire.RosterChange:
			kind := RosterJoinEvent
			if m.Kind == wire.RosterLeft {
				kind = RosterLeaveEvent
			}
			return RosterEvent{Kind: kind, Member: RosterMember{Member: m.Member, Metadata: m.Metadata}}, nil
		case *wire.SubscriptionGap:
			return RosterEvent{Kind: RosterGapEvent, Dropped: m.Dropped}, nil
		default:
			return RosterEvent{}, fmt.Errorf("%w: %s on a roster watch", ErrProtocol, m.Type())
		}
	}
}

// Close ends the watch.
func (w *RosterWatch) Close() error {
	w.js.close()
	return nil
}
