package controlplane

import (
	"context"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// position reads where history ends: the revision of the newest change
// (the head key's mod revision; 0 before the first change) and etcd's
// current revision. A cursor beyond the current revision was issued by
// another etcd (or one restored from an older backup): resync.
func (s *EtcdStore) position(ctx context.Context, after int64) (head int64, err error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.Get(cctx, s.head)
	if err != nil {
		return 0, unavailable(ctx, err)
	}
	if len(resp.Kvs) > 0 {
		head = resp.Kvs[0].ModRevision
	}
	if after > resp.Header.Revision {
		return 0, &ResyncError{Cursor: after, Revision: resp.Header.Revision, Ahead: true}
	}
	return head, nil
}

// Changes implements Store: the tail serves recent cursors; otherwise a
// watch from after+1 replays the retained history in revision order. The
// page ends at the head revision read first, so it never waits for changes
// that do not exist yet.
func (s *EtcdStore) Changes(ctx context.Context, after int64, limit int) (Page, error) {
	s.tail.ensure(ctx) // from now on, this reader's next pages come from memory
	head, err := s.position(ctx, after)
	if err != nil {
		return Page{}, err
	}
	page := Page{Revision: head}
	if head <= after {
		return page, nil
	}
	if p, ok := s.tail.read(ctx, after, head, limit); ok {
		return p, nil
	}
	wctx, cancel := s.call(ctx)
	defer cancel()
	for wr := range s.cli.Watch(wctx, s.resources, clientv3.WithPrefix(), clientv3.WithRev(after+1)) {
		if wr.CompactRevision != 0 {
			return Page{}, &ResyncError{Cursor: after, Oldest: wr.CompactRevision - 1, Revision: head}
		}
		if err := wr.Err(); err != nil {
			return Page{}, unavailable(ctx, err)
		}
		for _, ev := range wr.Events {
			rev := ev.Kv.ModRevision
			if len(page.Changes) == limit {
				page.Truncated = rev <= head
				return page, nil
			}
			if c, ok := s.change(ev); ok {
				page.Changes = append(page.Changes, c)
			}
			if rev >= head {
				return page, nil
			}
		}
	}
	// The watch closed before reaching head: timeout or lost leader.
	return Page{}, unavailable(ctx, wctx.Err())
}

func (s *EtcdStore) change(ev *clientv3.Event) (Change, bool) {
	ref, ok := ParseStoreKey(strings.TrimPrefix(string(ev.Kv.Key), s.resources))
	if !ok {
		return Change{}, false
	}
	c := Change{Revision: ev.Kv.ModRevision, Ref: ref, Op: OpCreated, Object: ev.Kv.Value}
	if ev.Type == mvccpb.DELETE {
		c.Op, c.Object = OpDeleted, nil
	}
	return c, true
}

// Wait implements Store with a watch from after+1: etcd answers at once if
// a change is already there, else as soon as one is committed, by any
// control plane on this etcd.
func (s *EtcdStore) Wait(ctx context.Context, after int64) error {
	if _, err := s.position(ctx, after); err != nil {
		return err
	}
	if ok, err := s.tail.wait(ctx, after); ok {
		return err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range s.cli.Watch(wctx, s.resources, clientv3.WithPrefix(), clientv3.WithRev(after+1)) {
		if wr.CompactRevision != 0 {
			return &ResyncError{Cursor: after, Oldest: wr.CompactRevision - 1}
		}
		if err := wr.Err(); err != nil {
			return unavailable(ctx, err)
		}
		if len(wr.Events) > 0 {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return unavailable(ctx, wctx.Err())
}
