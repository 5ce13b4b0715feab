package broker

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/wire"
)

// Roster limits: a member name and its metadata travel in every snapshot,
// so they are bounded like names rather than like payloads.
const (
	maxMemberBytes   = 1024
	maxMetadataBytes = 64 << 10
	// A roster_snapshot frame holds at most snapshotChunk members or about
	// snapshotChunkBytes: a 10 K-member snapshot is a handful of frames,
	// each far below the 16 MiB frame cap whatever the metadata sizes.
	snapshotChunk      = 1024
	snapshotChunkBytes = 1 << 20
)

// rosterKey names a roster. Rosters exist per (tenant, namespace, roster)
// and are created by the first join or watch; they are never configured.
type rosterKey struct{ Tenant, Namespace, Roster string }

func (k rosterKey) String() string { return k.Tenant + "/" + k.Namespace + "/" + k.Roster }

func rosterResource(k rosterKey) string { return "roster:" + k.String() }

// rosterEntry is one member: its metadata and the connection that joined
// it, which takes the member with it when it closes.
type rosterEntry struct {
	metadata []byte
	owner    *conn
}

// roster is the retained member set of one roster and its watchers.
//
// Design: joins, leaves and watch registration all take mu. A join or leave
// changes the set and encodes one roster_change frame that every watcher's
// queue gets a reference to, under mu; a watch copies the set into its
// snapshot and registers under mu. So every change is either in a
// watcher's snapshot or in its queue, never both and never neither: the
// snapshot and the changes meet without a gap. Watcher queues never block
// (DropNew whatever the broker's policy), so a slow watcher cannot hold mu;
// what it drops it is told about (subscription_gap) and must re-watch.
type roster struct {
	key rosterKey
	set *rosterSet // its counters
	mu  struct {
		sync.Mutex
		members  map[string]rosterEntry
		watchers []*rosterWatch
	}
}

// rosterSet holds every roster of the broker. Lock order: rosterSet.mu, then
// roster.mu, then fanout queue locks.
type rosterSet struct {
	// joins and leaves count membership changes (metrics).
	joins, leaves atomic.Uint64
	mu            struct {
		sync.Mutex
		m map[rosterKey]*roster
	}
}

// get returns the roster for k, creating it empty on first use. Rosters are
// kept for the broker's lifetime (an empty roster costs a map entry).
func (rs *rosterSet) get(k rosterKey) *roster {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.mu.m == nil {
		rs.mu.m = map[rosterKey]*roster{}
	}
	r := rs.mu.m[k]
	if r == nil {
		r = &roster{key: k, set: rs}
		r.mu.members = map[string]rosterEntry{}
		rs.mu.m[k] = r
	}
	return r
}

func validRosterName(what, v string, max int) error {
	if v == "" || len(v) > max || !utf8.ValidString(v) {
		return fmt.Errorf("%w: %s must be 1..%d bytes of UTF-8", ErrInvalidRequest, what, max)
	}
	return nil
}

func validateRosterKey(k rosterKey) error {
	if err := validRosterName("roster", k.Roster, 255); err != nil {
		return err
	}
	if strings.ContainsAny(k.Roster, "/\x00") {
		return fmt.Errorf("%w: roster %q must not contain '/'", ErrInvalidRequest, k.Roster)
	}
	return validRosterName("namespace", k.Namespace, 255)
}

// join adds member (or replaces its metadata and owner) and tells watchers.
func (r *roster) join(pool *fanout.Pool, owner *conn, member string, metadata []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.members[member] = rosterEntry{metadata: metadata, owner: owner}
	r.set.joins.Add(1)
	r.broadcastLocked(pool, &wire.RosterChange{Kind: wire.RosterJoined, Member: member, Metadata: metadata})
}

// leave removes member. With owner non-nil (a closing connection) it
// removes the member only if that connection still owns it: another
// connection may have joined the same name since. It reports whether the
// member was present (and removed).
func (r *roster) leave(pool *fanout.Pool, owner *conn, member string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.mu.members[member]
	if !ok || (owner != nil && e.owner != owner) {
		return false
	}
	delete(r.mu.members, member)
	r.set.leaves.Add(1)
	r.broadcastLocked(pool, &wire.RosterChange{Kind: wire.RosterLeft, Member: member})
	return true
}

// broadcastLocked encodes m once and queues a reference for every watcher.
func (r *roster) broadcastLocked(pool *fanout.Pool, m wire.Message) {
	if len(r.mu.watchers) == 0 {
		return
	}
	buf := pool.Get(256)
	buf.B = wire.AppendJSONFrame(buf.B[:0], m)
	buf.Events = 1
	for _, w := range r.mu.watchers {
		buf.Retain()
		w.queue.Push(buf) // DropNew: never waits; drops are counted
	}
	buf.Release()
}

// watch registers w and fills its snapshot, under the lock that orders
// changes, so the snapshot is exactly the set before w's first change.
func (r *roster) watch(w *rosterWatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.mu.members))
	for name := range r.mu.members {
		names = append(names, name)
	}
	slices.Sort(names)
	w.snapshot = appendSnapshot(w.snapshot[:0], r.mu.members, names)
	r.mu.watchers = append(slices.Clone(r.mu.watchers), w)
}

// appendSnapshot writes names (sorted) as roster_snapshot frames of at most
// snapshotChunk members or about snapshotChunkBytes each; the last frame has
// last=true, and an empty roster is one empty last frame.
func appendSnapshot(dst []byte, members map[string]rosterEntry, names []string) []byte {
	var chunk []wire.RosterMember
	size := 0
	for i, name := range names {
		e := members[name]
		chunk = append(chunk, wire.RosterMember{Member: name, Metadata: e.metadata})
		size += len(name) + len(e.metadata)*4/3 + 32
		if len(chunk) == snapshotChunk || size >= snapshotChunkBytes {
			dst = wire.AppendJSONFrame(dst, &wire.RosterSnapshot{Members: chunk, Last: i == len(names)-1})
			chunk, size = chunk[:0], 0
		}
	}
	if len(chunk) > 0 || len(names) == 0 {
		if chunk == nil {
			chunk = []wire.RosterMember{}
		}
		dst = wire.AppendJSONFrame(dst, &wire.RosterSnapshot{Members: chunk, Last: true})
	}
	return dst
}

func (r *roster) unwatch(w *rosterWatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := slices.Index(r.mu.watchers, w); i >= 0 {
		r.mu.watchers = slices.Delete(slices.Clone(r.mu.watchers), i, i+1)
	}
}

// membership is one member a connection joined, left on its close.
type membership struct {
	r      *roster
	member string
}
