package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdConfig configures an EtcdStore. Set Client or Endpoints.
type EtcdConfig struct {
	// Client is an etcd client the caller owns (Close leaves it open).
	Client *clientv3.Client
	// Endpoints are dialled when Client is nil; Close closes that client.
	Endpoints []string
	// Prefix is the key prefix of this control plane's data; several
	// control planes sharing it serve the same resources. Default
	// "/felix/controlplane/".
	Prefix string
	// Timeout bounds each etcd call (default 5s).
	Timeout time.Duration
	// TailSize is how many recent changes the store keeps in memory to
	// serve pages and long-polls without a watch from the past (default
	// 10000; see tail).
	TailSize int
}

// EtcdStore is the Store for clusters of control planes on one etcd.
//
// Design. Resources are JSON values under Prefix+"r/"+StoreKey(Ref). The
// feed's revisions are etcd mod revisions, and the feed is read with the
// watch API from cursor+1, which replays history in revision order and
// reports compaction (answered as a resync). Every mutation is one
// transaction that checks existence, parent and children with
// CreateRevision compares (so two control planes racing on one name
// cannot both win) and also writes Prefix+"head"; that key's mod revision
// is therefore the revision of the newest change, which tells a page read
// where history ends without waiting for a progress notification. Recent
// changes are also kept in memory by one live watch (see tail), which serves
// pages and long-polls without etcd's 100 ms catch-up cycle for watches
// that start in the past.
type EtcdStore struct {
	cli       *clientv3.Client
	ownClient bool
	resources string // key prefix of the resources
	head      string // key rewritten by every change
	timeout   time.Duration
	tail      *tail
	cluster   string    // key prefix of members and placement (store_etcd_members.go)
	notify    *notifier // Notify's watch on the whole prefix
}

// NewEtcdStore returns a store on etcd. It does not contact etcd; the first
// request does.
func NewEtcdStore(cfg EtcdConfig) (*EtcdStore, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = "/felix/controlplane/"
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("%w: etcd prefix %q must end in /", ErrInvalid, cfg.Prefix)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.TailSize == 0 {
		cfg.TailSize = 10000
	}
	s := &EtcdStore{cli: cfg.Client, resources: cfg.Prefix + "r/", head: cfg.Prefix + "head", timeout: cfg.Timeout,
		cluster: cfg.Prefix + "cluster/"}
	s.tail = newTail(s, cfg.TailSize)
	s.notify = newNotifier(s, cfg.Prefix)
	if s.cli == nil {
		if len(cfg.Endpoints) == 0 {
			return nil, fmt.Errorf("%w: etcd store needs a client or endpoints", ErrInvalid)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: cfg.Timeout, Logger: zap.NewNop()})
		if err != nil {
			return nil, fmt.Errorf("%w: etcd %v: %v", ErrUnavailable, cfg.Endpoints, err)
		}
		s.cli, s.ownClient = cli, true
	}
	return s, nil
}

func (s *EtcdStore) key(ref Ref) string { return s.resources + StoreKey(ref) }

// call bounds one etcd request and makes a partitioned member fail fast
// instead of answering from a stale view.
func (s *EtcdStore) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(clientv3.WithRequireLeader(ctx), s.timeout)
}

// unavailable wraps an etcd failure. ctx is the caller's context: if the
// caller went away, its error is the answer; a timeout of our own bound is
// etcd being slow or unreachable.
func unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		err = errors.New("watch closed")
	}
	return fmt.Errorf("%w: etcd: %v", ErrUnavailable, err)
}

// Create implements Store.
func (s *EtcdStore) Create(ctx context.Context, ref Ref, value []byte) (int64, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	key := s.key(ref)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
	parent, hasParent := parentOf(ref)
	if hasParent {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.key(parent)), ">", 0))
	}
	resp, err := s.cli.Txn(cctx).If(cmps...).
		Then(clientv3.OpPut(key, string(value)), clientv3.OpPut(s.head, "")).
		Else(clientv3.OpGet(key, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return 0, unavailable(ctx, err)
	}
	if !resp.Succeeded {
		if resp.Responses[0].GetResponseRange().Count > 0 {
			return 0, refErr(ErrExists, ref)
		}
		return 0, refErr(ErrParentNotFound, parent)
	}
	return resp.Header.Revision, nil
}

// Delete implements Store.
func (s *EtcdStore) Delete(ctx context.Context, ref Ref) (int64, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	key := s.key(ref)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), ">", 0)}
	orElse := []clientv3.Op{clientv3.OpGet(key, clientv3.WithCountOnly())}
	for _, p := range childPrefixes(ref) {
		// A compare over a range holds when every key in it does, and
		// vacuously when the range is empty: "no children".
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.resources+p), "=", 0).WithPrefix())
		orElse = append(orElse, clientv3.OpGet(s.resources+p, clientv3.WithPrefix(), clientv3.WithCountOnly()))
	}
	resp, err := s.cli.Txn(cctx).If(cmps...).
		Then(clientv3.OpDelete(key), clientv3.OpPut(s.head, "")).
		Else(orElse...).Commit()
	if err != nil {
		return 0, unavailable(ctx, err)
	}
	if !resp.Succeeded {
		if resp.Responses[0].GetResponseRange().Count == 0 {
			return 0, refErr(ErrNotFound, ref)
		}
		var n int64
		for _, r := range resp.Responses[1:] {
			n += r.GetResponseRange().Count
		}
		return 0, &RefError{Err: ErrNotEmpty, Ref: ref, Detail: fmt.Sprintf("it holds %d resources", n)}
	}
	return resp.Header.Revision, nil
}

// Get implements Store.
func (s *EtcdStore) Get(ctx context.Context, ref Ref) (Item, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.Get(cctx, s.key(ref))
	if err != nil {
		return Item{}, unavailable(ctx, err)
	}
	if len(resp.Kvs) == 0 {
		return Item{}, refErr(ErrNotFound, ref)
	}
	kv := resp.Kvs[0]
	return Item{Ref: ref, Revision: kv.ModRevision, Value: kv.Value}, nil
}

// List implements Store.
func (s *EtcdStore) List(ctx context.Context, kind Kind, parent string) ([]Item, int64, error) {
	return s.rangeItems(ctx, s.resources+ListPrefix(kind, parent))
}

// Snapshot implements Store. One range read is one consistent view: its
// header revision is the snapshot's revision.
func (s *EtcdStore) Snapshot(ctx context.Context) (int64, []Item, error) {
	// A snapshot is followed by the feed from its revision: start the tail
	// first, so that its base is at or before that revision.
	s.tail.ensure(ctx)
	items, rev, err := s.rangeItems(ctx, s.resources)
	return rev, items, err
}

func (s *EtcdStore) rangeItems(ctx context.Context, prefix string) ([]Item, int64, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.Get(cctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, unavailable(ctx, err)
	}
	items := make([]Item, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		ref, ok := ParseStoreKey(strings.TrimPrefix(string(kv.Key), s.resources))
		if !ok {
			continue // not ours: a key written under the prefix by hand
		}
		items = append(items, Item{Ref: ref, Revision: kv.ModRevision, Value: kv.Value})
	}
	return items, resp.Header.Revision, nil
}

// Close implements Store; it stops the tail's and the notifier's watches
// and closes the client only if the store dialled it. Members' leases are
// left to lapse (or to be kept alive through another control plane).
func (s *EtcdStore) Close() error {
	s.tail.close()
	s.notify.close()
	if s.ownClient {
		return s.cli.Close()
	}
	return nil
}
