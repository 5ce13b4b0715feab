package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
)

// PlacerConfig configures a Placer. The zero value is the default.
type PlacerConfig struct {
	// LeaseTTL is the lease a registering broker gets (default 3s); it
	// keeps it alive at a third of it.
	LeaseTTL time.Duration
	// RetryDelay is the pause after a failed recompute, e.g. while etcd
	// is unreachable (default 500ms).
	RetryDelay time.Duration
	// ReplaceAfter is how long a replicated shard's member may be absent
	// before the placer replaces it with another broker (default 60s;
	// negative: never).
	ReplaceAfter time.Duration
	// MaxMoves bounds the replicated shards that rebalancing keeps moving
	// at once, cluster-wide (default 2; negative: never rebalance).
	MaxMoves int
	// Logger receives recompute failures; nil discards.
	Logger *slog.Logger
}

// The defaults of PlacerConfig's zero fields.
const (
	DefaultLeaseTTL     = 3 * time.Second
	DefaultReplaceAfter = time.Minute
	DefaultMaxMoves     = 2
)

func (c PlacerConfig) withDefaults() PlacerConfig {
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = 500 * time.Millisecond
	}
	if c.ReplaceAfter == 0 {
		c.ReplaceAfter = DefaultReplaceAfter
	}
	if c.MaxMoves == 0 {
		c.MaxMoves = DefaultMaxMoves
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Placer keeps the stored placement equal to cluster.Rules.Place of the
// stored placement, the live members and the streams' shards.
//
// Design. One goroutine (pprof label goroutine=felix-cp-placer) takes the
// store's Notify channel, recomputes, and waits for the channel: every
// member change, lapsed lease, stream creation or deletion and placement
// write, by this control plane or another on the same etcd, wakes it.
// Members' load reports do not wake it; a recompute reads the last ones and
// gives each shard its owner's reported rate (cluster.Place uses it only
// for the choices counts leave open). Replica reports do wake it when they
// change (they change the placement), and it also wakes when an absent
// member of a replica set reaches its ReplaceAfter. A
// recompute writes only when the result differs from what is stored, with
// a compare-and-swap on the stored version; Place is deterministic, so
// several control planes recomputing from one store agree and at most one
// of them writes each change (the others lose the swap, re-read and find
// nothing to do). The placement it last read or wrote is kept in memory
// for the long-polls of GET /v1/placement.
type Placer struct {
	cfg     PlacerConfig
	store   Store
	members MemberStore
	stop    context.CancelFunc
	done    chan struct{}
	once    sync.Once
	changes atomic.Uint64 // placements published (metrics)
	mu      struct {
		sync.Mutex
		current cluster.Placement
		wake    chan struct{} // closed and replaced when current changes
	}
}

// NewPlacer starts a Placer over store, which must implement MemberStore
// (both built-in stores do). Close stops it; it does not close the store.
func NewPlacer(store Store, cfg PlacerConfig) (*Placer, error) {
	cfg = cfg.withDefaults()
	if cfg.LeaseTTL < 0 || cfg.RetryDelay < 0 {
		return nil, fmt.Errorf("%w: placer LeaseTTL %v and RetryDelay %v must not be negative", ErrInvalid, cfg.LeaseTTL, cfg.RetryDelay)
	}
	ms, ok := store.(MemberStore)
	if !ok {
		return nil, fmt.Errorf("%w: store %T keeps no cluster membership", ErrInvalid, store)
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &Placer{cfg: cfg, store: store, members: ms, stop: stop, done: make(chan struct{})}
	p.mu.wake = make(chan struct{})
	go pprof.Do(ctx, pprof.Labels("goroutine", "felix-cp-placer"), p.run)
	return p, nil
}

// Close stops the goroutine and waits for it; pending long-polls answer
// with the current placement. It is idempotent.
func (p *Placer) Close() error {
	p.once.Do(func() {
		p.stop()
		<-p.done
	})
	return nil
}

func (p *Placer) run(ctx context.Context) {
	defer close(p.done)
	for {
		changed, err := p.members.Notify(ctx)
		var pl cluster.Placement
		if err == nil {
			pl, err = p.recompute(ctx)
		}
		var retry <-chan time.Time
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.cfg.Logger.Warn("placement recompute failed; retrying", "err", err, "retry_in", p.cfg.RetryDelay)
			changed, retry = nil, time.After(p.cfg.RetryDelay)
		} else if at, ok := p.rules(time.Now()).NextReplace(pl); ok {
			retry = time.After(time.Until(at))
		}
		select {
		case <-changed:
		case <-retry:
		case <-ctx.Done():
			return
		}
	}
}

// rules are the placement rules at now.
func (p *Placer) rules(now time.Time) cluster.Rules {
	return cluster.Rules{Now: now, ReplaceAfter: max(p.cfg.ReplaceAfter, 0), MaxMoves: max(p.cfg.MaxMoves, 0)}
}

// maxSwaps bounds the compare-and-swap retries of one recompute; each lost
// swap means another control plane wrote, and the next wake-up recomputes.
const maxSwaps = 5

// recompute brings the stored placement up to date and returns it.
func (p *Placer) recompute(ctx context.Context) (cluster.Placement, error) {
	return p.Change(ctx, func(stored cluster.Placement) (cluster.Placement, error) {
		members, err := p.members.Members(ctx)
		if err != nil {
			return stored, err
		}
		shards, err := p.shards(ctx)
		if err != nil {
			return stored, err
		}
		loads, err := p.members.Loads(ctx)
		if err != nil {
			return stored, err
		}
		reports, err := p.members.ReplicaReports(ctx)
		if err != nil {
			return stored, err
		}
		withLoads(shards, stored, loads)
		withReports(shards, reports, members)
		return p.rules(time.Now()).Place(stored, members, shards), nil
	})
}

// Change stores change(the stored placement) with a compare-and-swap,
// re-reading and retrying when another writer got there first, and returns
// what is stored, or change's error. A result the same as the stored
// placement is not written. Besides recomputes, it stores an operator's
// move of a replica or of a preferred leader (cluster.Placement.MoveReplica,
// PreferLeader), which the recomputes that follow keep (cluster.Rules.Place
// keeps replica sets).
func (p *Placer) Change(ctx context.Context, change func(cluster.Placement) (cluster.Placement, error)) (cluster.Placement, error) {
	for range maxSwaps {
		stored, err := p.members.Placement(ctx)
		if err != nil {
			return stored, err
		}
		next, err := change(stored)
		if err != nil {
			return stored, err
		}
		if stored.Version != 0 && next.SameAs(stored) {
			p.publish(stored)
			return stored, nil
		}
		v, err := p.members.SwapPlacement(ctx, stored.Version, next)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return stored, err
		}
		next.Version = v
		p.publish(next)
		return next, nil
	}
	return cluster.Placement{}, fmt.Errorf("%w: placement changed under %d recomputes in a row", ErrConflict, maxSwaps)
}

// shards lists every shard of every stream, with its stream's
// replication factor.
func (p *Placer) shards(ctx context.Context) ([]cluster.ShardSpec, error) {
	items, _, err := p.store.List(ctx, KindStream, "")
	if err != nil {
		return nil, err
	}
	var out []cluster.ShardSpec
	for _, it := range items {
		var s api.Stream
		if err := json.Unmarshal(it.Value, &s); err != nil {
			return nil, fmt.Errorf("controlplane: stored %s is not valid: %w", it.Ref, err)
		}
		for i := range s.Shards {
			out = append(out, cluster.ShardSpec{Shard: cluster.Shard{Tenant: s.Tenant, Namespace: s.Namespace, Stream: s.Stream, Shard: i},
				Durable: s.Durable, Replicas: s.ReplicationFactor()})
		}
	}
	return out, nil
}

// withLoads sets each shard's Load to the rate its owner in stored last
// reported for it (a report by any other member is stale: the shard moved
// since). A departed owner's last report still counts, so that its shards
// are dealt heaviest first. A replicated shard takes the highest report of
// its replicas: raft, not the placement, chose the one that leads it and
// sees its publishes; the highest, so that the order in which the reports
// are read does not matter.
func withLoads(shards []cluster.ShardSpec, stored cluster.Placement, loads map[string][]cluster.ShardLoad) {
	if len(loads) == 0 {
		return
	}
	holds := make(map[cluster.Shard]cluster.Assignment, len(stored.Assignments))
	for _, a := range stored.Assignments {
		holds[a.Shard] = a
	}
	rate := map[cluster.Shard]int64{}
	for id, ls := range loads {
		for _, l := range ls {
			if a := holds[l.Shard]; a.Owner == id || slices.Contains(a.Replicas, id) {
				rate[l.Shard] = max(rate[l.Shard], l.BytesPerSec)
			}
		}
	}
	for i := range shards {
		shards[i].Load = rate[shards[i].Shard]
	}
}

// withReports gives each replicated shard the group its leader reported:
// of every member's last report, the one of the highest term for the
// shard, unless its member is not live (a leader that died since), and
// then none (not an older term's): the placement keeps the shard's last
// reported group until a live leader reports.
func withReports(shards []cluster.ShardSpec, reports map[string][]cluster.ReplicaReport, members []cluster.Member) {
	if len(reports) == 0 {
		return
	}
	live := make(map[string]bool, len(members))
	for _, m := range members {
		live[m.ID] = true
	}
	top := map[cluster.Shard]cluster.ReplicaReport{}
	for id, rs := range reports {
		for _, r := range rs {
			if r.Leader != id {
				continue
			}
			// Raft has one leader per term; the order among equal terms
			// only makes the choice independent of the map's.
			b, seen := top[r.Shard]
			if !seen || r.Term > b.Term || r.Term == b.Term && (live[r.Leader] && !live[b.Leader] || live[r.Leader] == live[b.Leader] && r.Leader < b.Leader) {
				top[r.Shard] = r
			}
		}
	}
	for i := range shards {
		if r, ok := top[shards[i].Shard]; ok && live[r.Leader] && shards[i].Replicas > 1 {
			shards[i].Voters, shards[i].Learners, shards[i].InSync = r.Voters, r.Learners, r.InSync
		}
	}
}

func (p *Placer) publish(pl cluster.Placement) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl.Version == p.mu.current.Version {
		return
	}
	p.mu.current = pl
	p.changes.Add(1)
	close(p.mu.wake)
	p.mu.wake = make(chan struct{})
}

// Wait returns the placement once its version differs from after (a
// version from another store, or from before a memory store restarted,
// answers at once), or the current one when ctx ends.
func (p *Placer) Wait(ctx context.Context, after int64) cluster.Placement {
	for {
		p.mu.Lock()
		cur, wake := p.mu.current, p.mu.wake
		p.mu.Unlock()
		if cur.Version != 0 && cur.Version != after {
			return cur
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return cur
		case <-p.done:
			return cur
		}
	}
}

// Current is the placement last read or written.
func (p *Placer) Current() cluster.Placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.current
}

// LeaseTTL is the lease registering members get.
func (p *Placer) LeaseTTL() time.Duration { return p.cfg.LeaseTTL }
