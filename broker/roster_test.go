package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/wire"
)

// rosterState applies watch events to a member set until stop says it is
// done; it fails on a gap (none may happen at these volumes).
func rosterState(ctx context.Context, t *testing.T, w *client.RosterWatch, state map[string]string, stop func(map[string]string) bool) {
	t.Helper()
	for !stop(state) {
		ev, err := w.Next(ctx)
		require.NoError(t, err)
		switch ev.Kind {
		case client.RosterSnapshotEvent:
			require.Empty(t, state, "one snapshot, first")
			for _, m := range ev.Members {
				state[m.Member] = string(m.Metadata)
			}
		case client.RosterJoinEvent:
			state[ev.Member.Member] = string(ev.Member.Metadata)
		case client.RosterLeaveEvent:
			_, ok := state[ev.Member.Member]
			require.True(t, ok, "leave of %s, which the state does not hold: a change was missed", ev.Member.Member)
			delete(state, ev.Member.Member)
		case client.RosterGapEvent:
			t.Fatalf("gap of %d changes", ev.Dropped)
		}
	}
}

// docs/design.md, "Semantics", roster: a late joiner's state (snapshot, then deltas) equals
// the true set, while joins and leaves from several connections race the
// watch's registration.
func TestRosterLateJoinerStateEqualsTrueSet(t *testing.T) {
	h := startBroker(t, broker.Config{Queue: fanoutCap(1 << 16)})
	ctx := ctxT(t, 30*time.Second)
	const writers, perWriter = 4, 150
	var wg sync.WaitGroup
	expected := make([]map[string]string, writers)
	started := make(chan struct{}, writers)
	for g := range writers {
		r, err := h.dial(t).Roster(ctx, "default", "lobby")
		require.NoError(t, err)
		expected[g] = map[string]string{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			signalled := false
			defer func() { // never leave the test waiting on a writer that failed
				if !signalled {
					started <- struct{}{}
				}
			}()
			for i := range perWriter {
				name := fmt.Sprintf("w%d-%d", g, i)
				meta := fmt.Sprintf(`{"i":%d}`, i)
				if err := r.Join(ctx, name, []byte(meta)); err != nil {
					t.Error(err)
					return
				}
				expected[g][name] = meta
				if i%3 == 0 {
					if err := r.Leave(ctx, name); err != nil {
						t.Error(err)
						return
					}
					delete(expected[g], name)
				}
				if i == perWriter/3 {
					started <- struct{}{}
					signalled = true
				}
			}
		}()
	}
	for range writers {
		<-started
	}
	watcher, err := h.dial(t).Roster(ctx, "default", "lobby")
	require.NoError(t, err)
	w, err := watcher.Watch(ctx) // registers mid-stream of joins and leaves
	require.NoError(t, err)
	wg.Wait()
	want := map[string]string{}
	for _, m := range expected {
		for k, v := range m {
			want[k] = v
		}
	}
	got := map[string]string{}
	rosterState(ctx, t, w, got, func(s map[string]string) bool { return len(s) == len(want) && fmt.Sprint(s) == fmt.Sprint(want) })
	require.Equal(t, want, got)

	// A watcher that arrives after the fact gets exactly the set at once.
	late, err := watcher.Watch(ctx)
	require.NoError(t, err)
	ev, err := late.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, client.RosterSnapshotEvent, ev.Kind)
	require.Len(t, ev.Members, len(want))
	for _, m := range ev.Members {
		require.Equal(t, want[m.Member], string(m.Metadata))
	}
}

// docs/design.md, "Semantics", roster: members leave by themselves when the connection
// that joined them closes; the watcher sees the leaves.
func TestRosterAutoLeaveOnConnectionClose(t *testing.T) {
	h := startBroker(t, broker.Config{})
	ctx := ctxT(t, 20*time.Second)
	stay, err := h.dial(t).Roster(ctx, "default", "room")
	require.NoError(t, err)
	require.NoError(t, stay.Join(ctx, "stayer", nil))
	goer := h.dial(t)
	r, err := goer.Roster(ctx, "default", "room")
	require.NoError(t, err)
	require.NoError(t, r.Join(ctx, "a", []byte("1")))
	require.NoError(t, r.Join(ctx, "b", nil))

	w, err := stay.Watch(ctx)
	require.NoError(t, err)
	state := map[string]string{}
	rosterState(ctx, t, w, state, func(s map[string]string) bool { return len(s) == 3 })
	require.NoError(t, goer.Close())
	rosterState(ctx, t, w, state, func(s map[string]string) bool { return len(s) == 1 })
	require.Equal(t, map[string]string{"stayer": ""}, state)
	require.Equal(t, []broker.RosterStats{{Roster: "t1/default/room", Members: 1, Watchers: 1}}, h.b.Stats().Rosters)
}

// Bad roster requests get precise errors and the stream and connection
// go on.
func TestRosterBadInputKeepsConnection(t *testing.T) {
	h := startBroker(t, broker.Config{})
	ctx := ctxT(t, 20*time.Second)
	c := h.dial(t)
	r, err := c.Roster(ctx, "default", "room")
	require.NoError(t, err)
	var be *client.BrokerError
	require.ErrorAs(t, r.Join(ctx, "", nil), &be)
	require.Equal(t, "invalid request: member must be 1..1024 bytes of UTF-8", be.Message)
	require.ErrorAs(t, r.Join(ctx, "m", make([]byte, 64<<10+1)), &be)
	require.Equal(t, "invalid request: metadata is 65537 bytes, max 65536", be.Message)
	require.ErrorAs(t, r.Leave(ctx, "ghost"), &be)
	require.Equal(t, `invalid request: "ghost" is not a member of roster t1/default/room`, be.Message)
	bad, err := c.Roster(ctx, "default", "a/b")
	require.NoError(t, err)
	require.ErrorAs(t, bad.Join(ctx, "m", nil), &be)
	require.Equal(t, `invalid request: roster "a/b" must not contain '/'`, be.Message)
	require.NoError(t, r.Join(ctx, "m", nil), "the same stream still works")
}

func fanoutCap(n int) fanout.Config { return fanout.Config{Capacity: n} }

// docs/design.md, "Compatibility": new operations are gated by capability bits. A client that
// did not advertise 0x0100 / 0x0200 gets a precise error, not replies it
// cannot parse, and its stream goes on.
func TestRosterAndGroupsNeedTheirCapability(t *testing.T) {
	h := startBroker(t, broker.Config{})
	ctx := ctxT(t, 10*time.Second)
	qc := h.rawConn(t)
	for _, tc := range []struct {
		m    wire.Message
		want string
	}{
		{&wire.RosterJoin{TenantID: "t1", Namespace: "default", Roster: "r", Member: "m"},
			`{"type":"error","message":"capability not negotiated: roster_join needs capability 0x0100 in auth client_caps"}`},
		{&wire.RosterWatch{TenantID: "t1", Namespace: "default", Roster: "r"},
			`{"type":"error","message":"capability not negotiated: roster_watch needs capability 0x0100 in auth client_caps"}`},
		{&wire.QueueConsume{TenantID: "t1", Namespace: "default", Stream: "demo", Group: "g", Member: "m"},
			`{"type":"error","message":"capability not negotiated: queue_consume needs capability 0x0200 in auth client_caps"}`},
	} {
		str, err := qc.OpenStreamSync(ctx)
		require.NoError(t, err)
		frames := append(bytes.Clone(authFrame), wire.AppendJSONFrame(nil, tc.m)...)
		frames = append(frames, wire.AppendJSONFrame(nil, &wire.Subscribe{TenantID: "t1", Namespace: "default", Stream: "nope"})...)
		_, err = str.Write(frames)
		require.NoError(t, err)
		require.NoError(t, str.Close())
		reply, err := io.ReadAll(str)
		require.NoError(t, err)
		require.Contains(t, string(reply), tc.want)
		require.Contains(t, string(reply), "stream not found", "the stream went on after the refusal")
	}
}

// A watcher that does not keep up loses changes through its bounded queue
// (never slowing the joins) and is told how many: a gap report, after
// which it knows its state is stale.
func TestRosterSlowWatcherGetsGapReport(t *testing.T) {
	h := startBroker(t, broker.Config{Queue: fanoutCap(16)})
	ctx := ctxT(t, 30*time.Second)
	slow := h.dialWith(t, client.Config{StreamReceiveWindow: 16 << 10, ConnectionReceiveWindow: 64 << 10, SubscriptionBuffer: 1})
	wr, err := slow.Roster(ctx, "default", "busy")
	require.NoError(t, err)
	w, err := wr.Watch(ctx)
	require.NoError(t, err)
	r, err := h.dial(t).Roster(ctx, "default", "busy")
	require.NoError(t, err)
	const joins = 3000 // ~180 KB of changes against 16 KiB + 16 queued
	for i := range joins {
		require.NoError(t, r.Join(ctx, fmt.Sprintf("member-%04d", i), nil))
	}
	var seen, dropped uint64
	for seen+dropped < joins {
		ev, err := w.Next(ctx)
		require.NoError(t, err)
		switch ev.Kind {
		case client.RosterJoinEvent:
			seen++
		case client.RosterGapEvent:
			dropped += ev.Dropped
		}
	}
	require.NotZero(t, dropped, "the watcher's queue must have dropped")
	require.Equal(t, uint64(joins), seen+dropped, "every change delivered or reported")
}

// A member name joined again from another connection belongs to that
// connection: the first connection's close does not take it away.
func TestRosterJoinFromAnotherConnectionTakesMemberOver(t *testing.T) {
	h := startBroker(t, broker.Config{})
	ctx := ctxT(t, 20*time.Second)
	first := h.dial(t)
	r1, err := first.Roster(ctx, "default", "room")
	require.NoError(t, err)
	require.NoError(t, r1.Join(ctx, "shared", []byte("v1")))
	r2, err := h.dial(t).Roster(ctx, "default", "room")
	require.NoError(t, err)
	require.NoError(t, r2.Join(ctx, "shared", []byte("v2")))
	require.NoError(t, r2.Join(ctx, "marker", nil))
	w, err := r2.Watch(ctx)
	require.NoError(t, err)
	state := map[string]string{}
	rosterState(ctx, t, w, state, func(s map[string]string) bool { return len(s) == 2 })
	require.Equal(t, map[string]string{"shared": "v2", "marker": ""}, state)
	require.NoError(t, first.Close())
	// Once the first connection is gone its members have been processed
	// (endExtras runs before the broker forgets it); a later change then
	// proves no leave of "shared" came before it, since changes arrive in
	// order.
	require.Eventually(t, func() bool { return len(h.b.Stats().Connections) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, r2.Leave(ctx, "marker"))
	ev, err := w.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, client.RosterEvent{Kind: client.RosterLeaveEvent, Member: client.RosterMember{Member: "marker"}}, ev)
}
