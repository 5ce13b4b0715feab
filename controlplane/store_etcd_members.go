package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/felixmq/felix/cluster"
)

// The etcd store's cluster keys, under Prefix+"cluster/":
//
//	members/{id}  the Member as JSON, attached to the member's own lease:
//	              etcd deletes it when the lease lapses, whichever control
//	              plane granted the lease and whether or not it still runs
//	placement     the Placement as JSON; its mod revision is its Version
//	load/{id}     the member's last load report ([]cluster.ShardLoad as
//	              JSON), without a lease: it outlives the member, so that
//	              the recompute after a leave or lapse deals the departed
//	              member's shards heaviest first (one small key per member
//	              ID ever registered). A key of its own rather than a
//	              field of members/{id}: the member key then changes only
//	              when membership does, and the notifier can ignore load
//	              writes by their prefix (load alone never recomputes).
//	replicas/{id} the member's last replica report ([]cluster.ReplicaReport
//	              as JSON), without a lease like load/{id}; written only
//	              when it differs from the stored one (a transaction
//	              comparing the value), so that an unchanged report every
//	              keepalive wakes no recompute.
//
// None is a resource: ParseStoreKey does not know them, so the feed,
// List and Snapshot never show them.

func (s *EtcdStore) memberKey(id string) string   { return s.cluster + "members/" + id }
func (s *EtcdStore) placementKey() string         { return s.cluster + "placement" }
func (s *EtcdStore) loadKey(id string) string     { return s.cluster + "load/" + id }
func (s *EtcdStore) replicasKey(id string) string { return s.cluster + "replicas/" + id }

// leaseSeconds is ttl in etcd's unit, rounded up.
func leaseSeconds(ttl time.Duration) int64 {
	return max(1, int64((ttl+time.Second-1)/time.Second))
}

// Register implements MemberStore: a new lease, the member's key attached
// to it, and the previous lease (a re-registration) revoked.
func (s *EtcdStore) Register(ctx context.Context, m cluster.Member, ttl time.Duration) (time.Duration, error) {
	m.Live = true
	val, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	lease, err := s.cli.Grant(cctx, leaseSeconds(ttl))
	if err != nil {
		return 0, unavailable(ctx, err)
	}
	resp, err := s.cli.Put(cctx, s.memberKey(m.ID), string(val), clientv3.WithLease(lease.ID), clientv3.WithPrevKV())
	if err != nil {
		s.cli.Revoke(cctx, lease.ID) // best effort; it lapses anyway
		return 0, unavailable(ctx, err)
	}
	if prev := resp.PrevKv; prev != nil && prev.Lease != 0 && clientv3.LeaseID(prev.Lease) != lease.ID {
		// The old lease holds no key any more; revoking it only tidies.
		s.cli.Revoke(cctx, clientv3.LeaseID(prev.Lease))
	}
	return time.Duration(lease.TTL) * time.Second, nil
}

// memberLease returns the lease id's key is attached to.
func (s *EtcdStore) memberLease(ctx context.Context, id string) (clientv3.LeaseID, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.Get(cctx, s.memberKey(id))
	if err != nil {
		return 0, unavailable(ctx, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, memberErr(id)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease), nil
}

// KeepAlive implements MemberStore with one KeepAliveOnce on the member's
// lease, and with a load report one Put of load/{id}.
func (s *EtcdStore) KeepAlive(ctx context.Context, id string, load []cluster.ShardLoad) (time.Duration, error) {
	lease, err := s.memberLease(ctx, id)
	if err != nil {
		return 0, err
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.KeepAliveOnce(cctx, lease)
	if errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) {
		return 0, memberErr(id) // lapsed between the read and the renewal
	}
	if err != nil {
		return 0, unavailable(ctx, err)
	}
	if load != nil {
		val, err := json.Marshal(load)
		if err != nil {
			return 0, err
		}
		if _, err := s.cli.Put(cctx, s.loadKey(id), string(val)); err != nil {
			return 0, unavailable(ctx, err)
		}
	}
	return time.Duration(resp.TTL) * time.Second, nil
}

// Loads implements MemberStore.
func (s *EtcdStore) Loads(ctx context.Context) (map[string][]cluster.ShardLoad, error) {
	return byMember[[]cluster.ShardLoad](ctx, s, s.loadKey(""), "load")
}

// byMember reads the JSON values under prefix, by the rest of their keys
// (a member ID).
func byMember[T any](ctx context.Context, s *EtcdStore, prefix, what string) (map[string]T, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.Get(cctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	out := make(map[string]T, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var v T
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			return nil, fmt.Errorf("controlplane: stored %s %s is not valid: %w", what, kv.Key, err)
		}
		out[strings.TrimPrefix(string(kv.Key), prefix)] = v
	}
	return out, nil
}

// ReportReplicas implements MemberStore with one transaction: if the
// member's key exists, put the report unless the stored one is equal.
func (s *EtcdStore) ReportReplicas(ctx context.Context, id string, reports []cluster.ReplicaReport) error {
	val, err := json.Marshal(reports)
	if err != nil {
		return err
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	key := s.replicasKey(id)
	// A Value comparison with a missing key fails, so a first report puts.
	unlessSame := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", string(val))}, nil,
		[]clientv3.Op{clientv3.OpPut(key, string(val))})
	resp, err := s.cli.Txn(cctx).If(clientv3.Compare(clientv3.CreateRevision(s.memberKey(id)), ">", 0)).Then(unlessSame).Commit()
	if err != nil {
		return unavailable(ctx, err)
	}
	if !resp.Succeeded {
		return memberErr(id)
	}
	return nil
}

// ReplicaReports implements MemberStore.
func (s *EtcdStore) ReplicaReports(ctx context.Context) (map[string][]cluster.ReplicaReport, error) {
	return byMember[[]cluster.ReplicaReport](ctx, s, s.replicasKey(""), "replica report")
}

// Leave implements MemberStore: revoking the lease deletes the key.
func (s *EtcdStore) Leave(ctx context.Context, id string) error {
	lease, err := s.memberLease(ctx, id)
	if err != nil {
		return err
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	_, err = s.cli.Revoke(cctx, lease)
	if errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) {
		return memberErr(id)
	}
	if err != nil {
		return unavailable(ctx, err)
	}
	return nil
}

// Members implements MemberStore.
func (s *EtcdStore) Members(ctx context.Context) ([]cluster.Member, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.Get(cctx, s.memberKey(""), clientv3.WithPrefix())
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	out := make([]cluster.Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var m cluster.Member
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			return nil, fmt.Errorf("controlplane: stored member %s is not valid: %w", kv.Key, err)
		}
		m.Live = true
		out = append(out, m)
	}
	return out, nil // by key, so by ID
}

// Placement implements MemberStore.
func (s *EtcdStore) Placement(ctx context.Context) (cluster.Placement, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.Get(cctx, s.placementKey())
	if err != nil {
		return cluster.Placement{}, unavailable(ctx, err)
	}
	var p cluster.Placement
	if len(resp.Kvs) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil {
		return p, fmt.Errorf("controlplane: stored placement is not valid: %w", err)
	}
	p.Version = resp.Kvs[0].ModRevision
	return p, nil
}

// SwapPlacement implements MemberStore with a transaction comparing the
// key's mod revision (0 for a key that does not exist).
func (s *EtcdStore) SwapPlacement(ctx context.Context, prev int64, p cluster.Placement) (int64, error) {
	p.Version = 0 // the mod revision is the version
	val, err := json.Marshal(p)
	if err != nil {
		return 0, err
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	key := s.placementKey()
	resp, err := s.cli.Txn(cctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", prev)).
		Then(clientv3.OpPut(key, string(val))).Commit()
	if err != nil {
		return 0, unavailable(ctx, err)
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

// Notify implements MemberStore with one watch on the store's whole prefix
// (see notifier).
func (s *EtcdStore) Notify(ctx context.Context) (<-chan struct{}, error) {
	return s.notify.channel(ctx)
}

// notifier turns one etcd watch on a prefix into broadcast channels: each
// event closes the current channel and installs a fresh one. Its goroutine
// (pprof label goroutine=felix-cp-etcd-notify) starts on the first channel
// asked for; if the watch fails it ends, closing the channel so that
// waiters re-read, and the next request starts a new watch.
type notifier struct {
	store  *EtcdStore
	prefix string
	mu     struct {
		sync.Mutex
		running bool
		closed  bool
		wake    chan struct{}
		cancel  context.CancelFunc
		done    chan struct{}
	}
}

func newNotifier(s *EtcdStore, prefix string) *notifier {
	n := &notifier{store: s, prefix: prefix}
	n.mu.wake = make(chan struct{})
	return n
}

// channel returns a channel closed at the next change after the call.
func (n *notifier) channel(ctx context.Context) (<-chan struct{}, error) {
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		return nil, ErrClosed
	}
	if n.mu.running {
		defer n.mu.Unlock()
		return n.mu.wake, nil
	}
	n.mu.Unlock()
	// Any read gives the current revision; the watch starts after it.
	cctx, cancel := n.store.call(ctx)
	resp, err := n.store.cli.Get(cctx, n.store.head)
	cancel()
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.mu.closed:
		return nil, ErrClosed
	case n.mu.running: // another caller started it meanwhile
		return n.mu.wake, nil
	}
	if n.mu.cancel != nil {
		n.mu.cancel() // the previous watch ended on its own; release its context
	}
	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	wch := n.store.cli.Watch(wctx, n.prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	n.mu.running, n.mu.cancel, n.mu.done = true, stop, make(chan struct{})
	done := n.mu.done
	go pprof.Do(context.Background(), pprof.Labels("goroutine", "felix-cp-etcd-notify"), func(context.Context) { n.run(wch, done) })
	return n.mu.wake, nil
}

func (n *notifier) run(wch clientv3.WatchChan, done chan struct{}) {
	defer close(done)
	for wr := range wch {
		if wr.Err() != nil || wr.Canceled {
			break
		}
		if slices.ContainsFunc(wr.Events, n.wakes) {
			n.mu.Lock()
			n.broadcastLocked()
			n.mu.Unlock()
		}
	}
	n.mu.Lock()
	n.mu.running = false
	n.broadcastLocked()
	n.mu.Unlock()
}

// wakes reports whether ev is a change waiters care about: anything but a
// load report (those never trigger a recompute by themselves).
func (n *notifier) wakes(ev *clientv3.Event) bool {
	return !strings.HasPrefix(string(ev.Kv.Key), n.store.loadKey(""))
}

func (n *notifier) broadcastLocked() {
	close(n.mu.wake)
	n.mu.wake = make(chan struct{})
}

// close stops the watch and waits for its goroutine; pending channels are
// closed.
func (n *notifier) close() {
	n.mu.Lock()
	n.mu.closed = true
	cancel, done := n.mu.cancel, n.mu.done
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
