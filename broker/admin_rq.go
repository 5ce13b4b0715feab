package broker

import (
	"cmp"
	"slices"
	"strings"
)

// RosterStats describes one roster for /debug/felix/stats.
type RosterStats struct {
	Roster   string `json:"roster"` // tenant/namespace/roster
	Members  int    `json:"members"`
	Watchers int    `json:"watchers"`
}

// GroupStats describes one consumer group for /debug/felix/stats.
type GroupStats struct {
	Stream string `json:"stream"`
	Shard  uint32 `json:"shard"` // a group over N shards shows as N entries
	Group  string `json:"group"`
	// Committed: every offset below it is acked. Next: the next offset
	// never delivered in this run. Tail: the stream's committed end.
	Committed uint64 `json:"committed"`
	Next      uint64 `json:"next"`
	Tail      uint64 `json:"tail"`
	// Lag is Tail - Committed: records not yet acked.
	Lag uint64 `json:"lag"`
	// Inflight records are out to members; Redo wait for redelivery;
	// AckedAbove are acked above Committed.
	Inflight   int `json:"inflight"`
	Redo       int `json:"redo"`
	AckedAbove int `json:"acked_above"`
	// DeadLetters are the group's dead letters on the shard.
	DeadLetters int `json:"dead_letters"`
}

func (rs *rosterSet) stats() []RosterStats {
	rs.mu.Lock()
	all := make([]*roster, 0, len(rs.mu.m))
	for _, r := range rs.mu.m {
		all = append(all, r)
	}
	rs.mu.Unlock()
	out := make([]RosterStats, 0, len(all))
	for _, r := range all {
		r.mu.Lock()
		out = append(out, RosterStats{Roster: r.key.String(), Members: len(r.mu.members), Watchers: len(r.mu.watchers)})
		r.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b RosterStats) int { return strings.Compare(a.Roster, b.Roster) })
	return out
}

func (gs *groupSet) stats() []GroupStats {
	gs.mu.Lock()
	all := make([]*groupShard, 0, len(gs.mu.m))
	for _, g := range gs.mu.m {
		all = append(all, g)
	}
	gs.mu.Unlock()
	out := make([]GroupStats, 0, len(all))
	for _, g := range all {
		g.mu.Lock()
		l := g.mu.ledger
		out = append(out, GroupStats{
			Stream: g.key.stream.String(), Shard: g.key.shard, Group: g.key.group,
			Committed: l.committed, Next: l.next, Tail: g.sh.tail(), Lag: g.sh.tail() - min(l.committed, g.sh.tail()),
			Inflight: len(l.inflight), Redo: l.redo.Len(), AckedAbove: len(l.acked), DeadLetters: len(l.dead),
		})
		g.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b GroupStats) int {
		if c := strings.Compare(a.Stream+"\x00"+a.Group, b.Stream+"\x00"+b.Group); c != 0 {
			return c
		}
		return cmp.Compare(a.Shard, b.Shard)
	})
	return out
}
