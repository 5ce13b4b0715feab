package broker

import (
	"context"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/wire"
)

// Replication's broker side (docs/cluster.md, "Replication"). Each
// replicated shard this broker holds a replica of is a replica.Group; the
// broker gives every group its raft transport (raftHost), drives every
// group with one ticker, and serves the other brokers' replication
// streams (wire.CapRaft).

// RaftConn is one replication stream to another broker: whole RaftBatch
// frames are written on it.
type RaftConn interface {
	Write(frames []byte) error
	// Done is closed when the stream's connection ends.
	Done() <-chan struct{}
	Close() error
}

// RaftDialer opens a replication stream to broker m, authenticated with
// this broker's node credential (cmd/felix-broker builds one on the
// client package).
type RaftDialer func(ctx context.Context, m cluster.Member) (RaftConn, error)

// raftID is a member's raft id: a hash of its member id (never 0).
func raftID(member string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	if id := h.Sum64(); id != 0 {
		return id
	}
	return 1
}

// raftHost is the broker's replication machinery.
type raftHost struct {
	b *Broker
	// queueMessages bounds what waits for one peer: past it, messages are
	// dropped and raft told the peer is unreachable (it sends again), so
	// a slow or dead peer never makes the broker buffer without bound.
	queueMessages int

	mu struct {
		sync.Mutex
		groups  map[string]*replicated // by group name
		members map[uint64]cluster.Member
		peers   map[uint64]*raftPeer
		closed  bool
	}
	// hints are the leaders of shards this broker holds no replica of.
	hints leaderHints
	// catchUp throttles appends to learners; nil: unthrottled.
	catchUp *rate.Limiter
	// reportNow has a value when a leader's report changed
	// (Broker.ReplicasChanged).
	reportNow chan struct{}
	stop      chan struct{}
	done      chan struct{}
}

func newRaftHost(b *Broker) *raftHost {
	h := &raftHost{b: b, queueMessages: 8192, reportNow: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if bps := b.cfg.RaftCatchUpBytesPerSecond; bps > 0 {
		// A burst of an eighth of a second's worth (at least one full
		// append): a move of a few MiB is throttled too. An append larger
		// than the burst (one entry as large as a publish frame) is
		// charged the whole burst (admitCatchUp).
		h.catchUp = rate.NewLimiter(rate.Limit(bps), int(max(bps/8, raftMaxAppendBytes)))
	}
	h.mu.groups = map[string]*replicated{}
	h.mu.members = map[uint64]cluster.Member{}
	h.mu.peers = map[uint64]*raftPeer{}
	go h.run()
	return h
}

// run is the broker's one raft ticker: every group gets its tick from it,
// and groups in the periodic fsync mode their sync.
func (h *raftHost) run() {
	defer close(h.done)
	t := time.NewTicker(h.b.cfg.RaftTick)
	defer t.Stop()
	lastSync := time.Now()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			syncDue := now.Sub(lastSync) >= h.b.cfg.FsyncInterval
			if syncDue {
				lastSync = now
			}
			for _, r := range h.groupList() {
				r.group.Tick()
				r.expireWaiters(now)
				r.reconcile(now)
				if syncDue && r.periodic {
					r.syncPeriodic()
				}
			}
		}
	}
}

func (h *raftHost) groupList() []*replicated {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*replicated, 0, len(h.mu.groups))
	for _, r := range h.mu.groups {
		out = append(out, r)
	}
	return out
}

func (h *raftHost) add(r *replicated) {
	h.mu.Lock()
	h.mu.groups[r.name] = r
	h.mu.Unlock()
}

func (h *raftHost) remove(r *replicated) {
	h.mu.Lock()
	if h.mu.groups[r.name] == r {
		delete(h.mu.groups, r.name)
	}
	h.mu.Unlock()
}

// setMembers learns where every member is (from the placement).
func (h *raftHost) setMembers(ms []cluster.Member) {
	var moved []*raftPeer
	h.mu.Lock()
	for _, m := range ms {
		id := raftID(m.ID)
		if old, ok := h.mu.members[id]; ok && old.QUICAddr != m.QUICAddr {
			if p := h.mu.peers[id]; p != nil {
				moved = append(moved, p) // the next send dials the new address
				delete(h.mu.peers, id)
			}
		}
		h.mu.members[id] = m
	}
	h.mu.Unlock()
	for _, p := range moved {
		p.close() // its goroutine takes h.mu to report what it drops
	}
}

// member is the member with raft id id.
func (h *raftHost) member(id uint64) (cluster.Member, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.mu.members[id]
	return m, ok
}

// send queues msgs of group for their peers; what cannot be queued is
// dropped and reported unreachable.
func (h *raftHost) send(group *replicated, msgs []*pb.Message) {
	var learners []uint64
	if h.catchUp != nil {
		learners = group.group.Status().Learners
	}
	for _, m := range msgs {
		to := m.GetTo()
		if len(learners) > 0 && slices.Contains(learners, to) && !h.admitCatchUp(m) {
			group.group.ReportUnreachable(to) // raft probes again later
			continue
		}
		p := h.peer(to)
		if p == nil || !p.enqueue(raftEnvelope{group: group.name, msg: m}) {
			group.group.ReportUnreachable(to)
		}
	}
}

// admitCatchUp takes an append to a learner (a replica being added)
// through the catch-up throttle (Config.RaftCatchUpBytesPerSecond): false
// drops it, and raft sends again once it probes the learner, so moving a
// replica never takes more than the throttle from client traffic.
func (h *raftHost) admitCatchUp(m *pb.Message) bool {
	if m.GetType() != pb.MessageType_MsgApp {
		return true
	}
	n := 0
	for _, e := range m.GetEntries() {
		n += len(e.GetData())
	}
	if !h.catchUp.AllowN(time.Now(), min(n, h.catchUp.Burst())) {
		h.b.metrics.raft.catchUpThrottled.Inc()
		return false
	}
	h.b.metrics.raft.catchUpBytes.Add(float64(n))
	return true
}

// peer is the sender to raft id id, started on first use; nil when the
// member is unknown or the host is closed.
func (h *raftHost) peer(id uint64) *raftPeer {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return nil
	}
	if p := h.mu.peers[id]; p != nil {
		return p
	}
	m, ok := h.mu.members[id]
	if !ok || h.b.cfg.RaftDialer == nil {
		return nil
	}
	p := newRaftPeer(h, m)
	h.mu.peers[id] = p
	return p
}

// receive steps the messages of one batch into their groups. A message
// for a group this broker does not hold (not opened yet, or no longer
// ours) is dropped: raft sends again.
func (h *raftHost) receive(batch []wire.RaftMessage) {
	for _, rm := range batch {
		h.mu.Lock()
		r := h.mu.groups[rm.Group]
		h.mu.Unlock()
		if r == nil {
			h.b.metrics.raft.dropped.Inc()
			continue
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(rm.Message, m); err != nil {
			h.b.metrics.raft.dropped.Inc()
			continue
		}
		r.group.Step(m)
	}
}

func (h *raftHost) close() {
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return
	}
	h.mu.closed = true
	peers := h.mu.peers
	h.mu.peers = nil
	h.mu.Unlock()
	close(h.stop)
	<-h.done
	for _, p := range peers {
		p.close()
	}
}

type raftEnvelope struct {
	group string
	msg   *pb.Message
}

// raftPeer sends one broker's raft messages, batched: whatever is queued
// when the stream can take more goes in one frame.
type raftPeer struct {
	h     *raftHost
	m     cluster.Member
	queue chan raftEnvelope
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	// conn is the open stream, closed by close to end a Write that waits
	// on a peer that stopped reading.
	connMu sync.Mutex
	conn   RaftConn
	// later and frame are run's alone.
	later map[string]uint64
	frame []byte
}

const (
	raftBatchMessages = 1024
	raftBatchBytes    = 4 << 20
	// raftMaxAppendBytes is replica.Config's default MaxSizePerMsg, which
	// the broker leaves as it is.
	raftMaxAppendBytes = 1 << 20
)

func newRaftPeer(h *raftHost, m cluster.Member) *raftPeer {
	p := &raftPeer{h: h, m: m, queue: make(chan raftEnvelope, h.queueMessages), stop: make(chan struct{}), done: make(chan struct{}),
		later: map[string]uint64{}}
	go p.run()
	return p
}

func (p *raftPeer) enqueue(e raftEnvelope) bool {
	select {
	case p.queue <- e:
		return true
	default:
		p.h.b.metrics.raft.dropped.Inc()
		return false
	}
}

func (p *raftPeer) close() {
	p.once.Do(func() { close(p.stop) })
	p.setConn(nil)
	<-p.done
}

// setConn makes c the open stream, closing the one before.
func (p *raftPeer) setConn(c RaftConn) {
	p.connMu.Lock()
	old := p.conn
	p.conn = c
	p.connMu.Unlock()
	if old != nil {
		old.Close()
	}
}

func (p *raftPeer) run() {
	defer close(p.done)
	var conn RaftConn
	defer p.setConn(nil)
	backoff := 50 * time.Millisecond
	var envs []raftEnvelope
	for {
		envs = envs[:0]
		select {
		case <-p.stop:
			return
		case e := <-p.queue:
			envs = append(envs, e)
		}
	more:
		for len(envs) < raftBatchMessages {
			select {
			case e := <-p.queue:
				envs = append(envs, e)
			default:
				break more
			}
		}
		envs = p.supersede(envs)
		if conn == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			c, err := p.h.b.cfg.RaftDialer(ctx, p.m)
			cancel()
			if err != nil {
				p.unreachable(envs)
				p.h.b.log.Debug("raft: peer unreachable", "peer", p.m.ID, "addr", p.m.QUICAddr, "err", err)
				select {
				case <-p.stop:
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
			select {
			case <-p.stop:
				c.Close()
				return
			default:
			}
			p.setConn(c)
			conn, backoff = c, 50*time.Millisecond
		}
		if err := p.write(conn, envs); err != nil {
			p.setConn(nil)
			conn = nil
		}
	}
}

// write sends envs on conn, a RaftBatch frame of about raftBatchBytes at
// a time, each written as soon as it is built: a backlog (up to 1,024
// appends of 1 MiB) never becomes one buffer grown to its size, and the
// first appends leave before the last are encoded. What an error leaves
// unwritten is reported unreachable.
func (p *raftPeer) write(conn RaftConn, envs []raftEnvelope) error {
	for i := 0; i < len(envs); {
		var n int
		p.frame, n = appendRaftFrame(p.frame[:0], envs[i:])
		if err := conn.Write(p.frame); err != nil {
			p.unreachable(envs[i:])
			return err
		}
		p.h.b.metrics.raft.sent(envs[i:i+n], len(p.frame))
		i += n
	}
	return nil
}

// supersede drops from envs each append that carries only a commit index
// when a later append of its group in envs carries as high a one: the
// follower learns the commit from that one (and answers it), so the first
// would only cost it a round of its group and an answer. A leader's group
// steps the answers that move its commit before the proposals that came
// meanwhile, so under load each of its rounds sends a follower such a
// pair. Raft tolerates any message lost. envs keeps its order.
func (p *raftPeer) supersede(envs []raftEnvelope) []raftEnvelope {
	if len(envs) < 2 {
		return envs
	}
	clear(p.later)
	keep := len(envs)
	for i := len(envs) - 1; i >= 0; i-- {
		e := envs[i]
		if m := e.msg; m.GetType() == pb.MessageType_MsgApp {
			c, seen := p.later[e.group]
			if seen && len(m.GetEntries()) == 0 && c >= m.GetCommit() {
				continue
			}
			p.later[e.group] = max(c, m.GetCommit())
		}
		keep--
		envs[keep] = e
	}
	n := copy(envs, envs[keep:])
	clear(envs[n:])
	return envs[:n]
}

// appendRaftFrame appends to frame a RaftBatch frame of the first n of
// envs, at least one and as many as fit in about raftBatchBytes, each
// message encoded in place.
func appendRaftFrame(frame []byte, envs []raftEnvelope) ([]byte, int) {
	start, count, n := len(frame), 0, 0
	frame = wire.BeginRaftBatchFrame(frame)
	for ; n < len(envs) && (n == 0 || len(frame)-start < raftBatchBytes); n++ {
		m := envs[n].msg
		var err error
		frame, err = wire.AppendRaftMessage(frame, envs[n].group, func(b []byte) ([]byte, error) {
			return proto.MarshalOptions{}.MarshalAppend(b, m)
		})
		if err == nil {
			count++
		}
	}
	return wire.EndRaftBatchFrame(frame, start, count), n
}

// unreachable tells the groups of envs their messages were not delivered.
func (p *raftPeer) unreachable(envs []raftEnvelope) {
	id := raftID(p.m.ID)
	for _, e := range envs {
		p.h.mu.Lock()
		r := p.h.mu.groups[e.group]
		p.h.mu.Unlock()
		if r != nil {
			r.group.ReportUnreachable(id)
		}
	}
}

// raftFrameMax bounds a replication stream's frame: a sender's batch
// grows past raftBatchBytes by at most one message, and raft's append
// message holds up to MaxSizePerMsg (1 MiB) of entries, or one entry,
// itself at most a publish frame. Tied to the client frame limit alone,
// a broker with small frames refused every large batch, and a follower
// that was away never caught up.
func raftFrameMax(maxFrame uint32) uint32 {
	return raftBatchBytes + raftMaxAppendBytes + maxFrame + 64<<10
}
