package main

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/client"
)

// The roster scenario: --members members join one roster, spread over
// connections of up to membersPerConn members each (members belong to
// their connection, and thousands of connections would measure dialing,
// not rosters). Then a late joiner on its own connection watches the
// roster --count times: time-to-complete-state runs from calling Watch to
// the snapshot's last frame (client.RosterWatch.Next returns the snapshot
// whole). Every snapshot must hold exactly the joined members. The roster
// is named for the round, so members of an earlier round (which leave
// when their connections close, asynchronously) are never counted.
// Samples taken during --warmup are not measured.

// membersPerConn is how many members share one connection.
const membersPerConn = 64

func rosterMember(i int) string { return fmt.Sprintf("m%07d", i) }

func rosterRound(ctx context.Context, e *scenarioEnv) (ScenarioRound, error) {
	cfg := e.cfg
	name := fmt.Sprintf("lg%04x-roster", e.tag)
	conns := make([]*client.Client, (cfg.Members+membersPerConn-1)/membersPerConn)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	joinHists := make([]*opHist, len(conns))
	var joined atomic.Int64
	joinStart := time.Now()
	err := forEach(len(conns), func(i int) error {
		h := &opHist{}
		joinHists[i] = h
		c, err := dial(ctx, cfg, false)
		if err != nil {
			return fmt.Errorf("member connection %d: %w", i, err)
		}
		conns[i] = c
		jctx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
		defer cancel()
		ro, err := c.Roster(jctx, cfg.Namespace, name)
		if err != nil {
			return fmt.Errorf("member connection %d: %w", i, err)
		}
		defer ro.Close()
		for m := i * membersPerConn; m < min((i+1)*membersPerConn, cfg.Members); m++ {
			t := time.Now()
			if err := ro.Join(jctx, rosterMember(m), nil); err != nil {
				return fmt.Errorf("join %s: %w", rosterMember(m), err)
			}
			h.record(t, time.Now())
			joined.Add(1)
		}
		return nil
	})
	joinDur := time.Since(joinStart)
	if err != nil {
		return ScenarioRound{}, err
	}
	cfg.logf("[round %d] %s members joined %s over %s in %s\n", e.n, group(uint64(joined.Load())), name,
		plural(len(conns), "connection"), joinDur.Round(time.Millisecond))
	r, err := lateJoiner(ctx, e, name)
	if err != nil {
		return ScenarioRound{}, err
	}
	var jh Histogram
	for _, h := range joinHists {
		jh.Merge(&h.hist)
	}
	// Joins are the set-up, not the measured phase: their rate is over
	// the joining time, dials included.
	join := OpResult{Op: "join (set-up)", Count: jh.Count(), Latency: jh.Summary(), Seconds: joinDur.Seconds(),
		PerS: float64(jh.Count()) / joinDur.Seconds()}
	r.Ops = append(r.Ops, join)
	if n, ok := rosterMembers(ctx, cfg, name); ok {
		r.Checks = append(r.Checks, check("members the broker lists (/debug/felix/stats) minus members joined", int64(n-cfg.Members), 0))
	}
	r.Counts["members joined"] = uint64(joined.Load())
	r.Counts["member connections"] = uint64(len(conns))
	return r, nil
}

// lateJoiner watches the roster until its budget ends and checks each
// snapshot.
func lateJoiner(ctx context.Context, e *scenarioEnv, name string) (ScenarioRound, error) {
	cfg := e.cfg
	c, err := dial(ctx, cfg, false)
	if err != nil {
		return ScenarioRound{}, fmt.Errorf("late joiner: %w", err)
	}
	defer c.Close()
	ro, err := c.Roster(ctx, cfg.Namespace, name)
	if err != nil {
		return ScenarioRound{}, fmt.Errorf("late joiner: %w", err)
	}
	defer ro.Close()
	want := make([]string, cfg.Members)
	for i := range want {
		want[i] = rosterMember(i)
	}
	slices.Sort(want)
	r := ScenarioRound{Counts: map[string]uint64{}}
	var h opHist
	var sizeOff, setOff int64
	var samples atomic.Int64 // read by the progress line
	e.startClock()
	stop := e.startProgress(func() string { return "snapshots " + group(uint64(samples.Load())) })
	defer stop()
	b := e.budget(0, 1)
	for {
		ok, measured := b.next(ctx, time.Now())
		if !ok {
			break
		}
		start := time.Now()
		members, err := snapshot(ctx, cfg, ro)
		if err != nil {
			if ctx.Err() == nil {
				r.Errors = append(r.Errors, fmt.Sprintf("late joiner: %v", err))
			}
			break
		}
		if measured {
			h.record(start, time.Now())
		}
		samples.Add(1)
		if len(members) != len(want) {
			sizeOff++
		} else if !slices.EqualFunc(members, want, func(m client.RosterMember, w string) bool { return m.Member == w }) {
			setOff++
		}
	}
	r.Ops = []OpResult{e.mergeOps("complete state", []*opHist{&h})}
	r.MeasuredSeconds = r.Ops[0].Seconds
	r.Checks = []Check{
		check("snapshots whose size is not the members joined", sizeOff, 0),
		check("snapshots of the right size with other members", setOff, 0),
	}
	r.Counts["snapshots"] = uint64(samples.Load())
	return r, nil
}

// snapshot watches the roster and returns its snapshot, sorted by member
// as the broker sends it.
func snapshot(ctx context.Context, cfg *Config, ro *client.Roster) ([]client.RosterMember, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	defer cancel()
	w, err := ro.Watch(ctx)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	ev, err := w.Next(ctx)
	if err != nil {
		return nil, err
	}
	if ev.Kind != client.RosterSnapshotEvent {
		return nil, fmt.Errorf("first event of a roster watch is kind %d, not the snapshot", ev.Kind)
	}
	return ev.Members, nil
}

// rosterMembers is the broker's own count of the roster's members, the
// true count the snapshots are checked against; false when unavailable.
func rosterMembers(ctx context.Context, cfg *Config, name string) (int, bool) {
	a := newAdmin(cfg)
	if a == nil {
		return 0, false
	}
	var stats struct {
		Rosters []struct {
			Roster  string `json:"roster"`
			Members int    `json:"members"`
		} `json:"rosters"`
	}
	if err := a.get(ctx, "/debug/felix/stats", &stats); err != nil {
		return 0, false
	}
	for _, r := range stats.Rosters {
		if r.Roster == cfg.Tenant+"/"+cfg.Namespace+"/"+name {
			return r.Members, true
		}
	}
	return 0, false
}
