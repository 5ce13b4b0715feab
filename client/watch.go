package client

import (
	"context"
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// WatchOptions refine Watch.
type WatchOptions struct {
	// Current delivers the key's current state first (a put, a counter, or
	// a delete when absent), then every later change, with no gap and no
	// duplicate between them.
	Current bool
}

// WatchEvent is one change of a watched key, or a gap report.
type WatchEvent struct {
	// Op is put, delete (also an LRU eviction) or counter.
	Op  wire.CacheOp
	Key string
	// Value is the new value (a counter's decimal sum); it belongs to the
	// caller. Empty for a delete.
	Value []byte
	// ExpiresAt is when the value expires; zero for none.
	ExpiresAt time.Time
	// Revision orders the cache's changes: it grows with every change of
	// the cache (for a durable cache it is the change's log offset).
	Revision uint64
	// Current marks the first event of a watch opened with
	// WatchOptions.Current: the key's state when the watch began, not a
	// change. A present key's state carries the revision of the change
	// that made it; an absent key's (Op delete) the cache's latest
	// revision, or 0 before its first change. Every event after it is a
	// later change.
	Current bool
	// Dropped, when non-zero, makes this a gap report: that many changes
	// were dropped for this watcher (its queue was full).
	Dropped uint64
}

// Watch follows one key of a cache on an event stream of its own.
type Watch struct {
	sub *Subscription
	// current: the next event is the key's current state (Next only).
	current bool
}

// Watch asks the broker for every later put and delete of key in
// namespace/cache.
func (c *Client) Watch(ctx context.Context, namespace, cache, key string, opts WatchOptions) (*Watch, error) {
	ct, err := c.openControl(ctx)
	if err != nil {
		return nil, err
	}
	defer ct.str.CancelRead(0)
	if !wire.Supports(ct.flags, wire.CapCache) {
		ct.str.CancelWrite(0)
		return nil, fmt.Errorf("%w: the broker does not support watch (no cache capability)", ErrProtocol)
	}
	msg := &wire.Watch{TenantID: c.cfg.Tenant, Namespace: namespace, Cache: cache, Key: key}
	if opts.Current {
		msg.Current = &opts.Current
	}
	if _, err := ct.str.Write(wire.AppendJSONFrame(nil, msg)); err != nil {
		return nil, fmt.Errorf("client: write watch: %w", err)
	}
	ct.str.Close()
	m, err := ct.readJSON(ctx)
	if err != nil {
		return nil, err
	}
	switch m := m.(type) {
	case *wire.Subscribed:
		return &Watch{sub: c.newSubscription(ct.sess, m.SubscriptionID), current: opts.Current}, nil
	case *wire.CacheError:
		return nil, &CacheError{Code: m.Code, Message: m.Message}
	case *wire.ErrorMessage:
		return nil, brokerError(m.Message, m.Err, m.Owner)
	}
	return nil, fmt.Errorf("%w: %s in reply to watch", ErrProtocol, m.Type())
}

// Next returns the next change or gap report, blocking until one arrives,
// ctx ends, or the watch ends. One goroutine at a time calls it.
func (w *Watch) Next(ctx context.Context) (WatchEvent, error) {
	ev, err := w.sub.Next(ctx)
	if err != nil {
		return WatchEvent{}, err
	}
	if ev.Dropped != 0 {
		return WatchEvent{Dropped: ev.Dropped}, nil
	}
	var r wire.CacheRecord
	if err := wire.DecodeCacheRecord(ev.Payload, &r); err != nil {
		return WatchEvent{}, fmt.Errorf("%w: watch event: %w", ErrProtocol, err)
	}
	out := WatchEvent{Op: r.Op, Key: string(r.Key), Value: r.Value, Revision: ev.Offset, Current: w.current}
	w.current = false
	if r.ExpiresAt != 0 {
		out.ExpiresAt = time.UnixMilli(int64(r.ExpiresAt))
	}
	return out, nil
}

// Dropped counts changes the broker reported dropped for this watch.
func (w *Watch) Dropped() uint64 { return w.sub.Dropped() }

// Close ends the watch.
func (w *Watch) Close() error { return w.sub.Close() }
