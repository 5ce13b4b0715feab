package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/felixmq/felix/controlplane/api"
)

// resourceFeed is the feed's resource: the snapshot and changes span every
// tenant.
const resourceFeed = "cluster:*"

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(r, ActionWatch, resourceFeed); err != nil {
		return err
	}
	rev, items, err := s.store.Snapshot(r.Context())
	if err != nil {
		return err
	}
	snap := api.Snapshot{Revision: rev, Tenants: []api.Tenant{}, Namespaces: []api.Namespace{}, Streams: []api.Stream{}, Caches: []api.Cache{}}
	for _, it := range items {
		switch it.Kind {
		case KindTenant:
			err = appendItem(&snap.Tenants, it, func(v *api.Tenant) *int64 { return &v.Revision })
		case KindNamespace:
			err = appendItem(&snap.Namespaces, it, func(v *api.Namespace) *int64 { return &v.Revision })
		case KindStream:
			err = appendItem(&snap.Streams, it, func(v *api.Stream) *int64 { return &v.Revision })
		case KindCache:
			err = appendItem(&snap.Caches, it, func(v *api.Cache) *int64 { return &v.Revision })
		}
		if err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, snap)
}

// appendItem decodes a stored resource onto dst with the store's revision.
func appendItem[T any](dst *[]T, it Item, revision func(*T) *int64) error {
	var v T
	if err := json.Unmarshal(it.Value, &v); err != nil {
		return fmt.Errorf("controlplane: stored %s is not valid: %w", it.Ref, err)
	}
	*revision(&v) = it.Revision
	*dst = append(*dst, v)
	return nil
}

// changes serves a page of the feed. With wait, an empty page is held
// until a change arrives (then answered at once) or the wait runs out
// (then answered empty): a broker holding a long-poll learns of a change
// as soon as the store does.
func (s *Server) changes(w http.ResponseWriter, r *http.Request) error {
	cursor, err := queryInt(r, "cursor", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", int64(s.cfg.DefaultLimit), 1, int64(s.cfg.MaxLimit))
	if err != nil {
		return err
	}
	wait, err := queryDuration(r, "wait", s.cfg.MaxWait)
	if err != nil {
		return err
	}
	if err := s.authorize(r, ActionWatch, resourceFeed); err != nil {
		return err
	}
	page, err := s.store.Changes(r.Context(), cursor, int(limit))
	if err == nil && len(page.Changes) == 0 && wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		defer context.AfterFunc(s.stop, cancel)()
		s.metrics.feedWaiters.Add(1)
		werr := s.store.Wait(ctx, cursor)
		s.metrics.feedWaiters.Add(-1)
		switch {
		case (ctx.Err() != nil || s.stop.Err() != nil) && r.Context().Err() == nil:
			// The wait ran out, or the server is closing (its own store
			// may be closed already): an empty page tells the broker to
			// ask again.
		case werr == nil || errors.Is(werr, ErrResync):
			page, err = s.store.Changes(r.Context(), cursor, int(limit))
		default:
			err = werr
		}
	}
	if err != nil {
		return err
	}
	out := api.ChangesPage{Changes: publicChanges(page.Changes), Truncated: page.Truncated, NextCursor: cursor, Revision: page.Revision}
	// The cursor advances past hidden changes too, or a reader whose
	// next change is hidden would be answered the same empty page forever.
	if n := len(page.Changes); n > 0 {
		out.NextCursor = page.Changes[n-1].Revision
	} else if !page.Truncated && page.Revision > cursor {
		// Only hidden changes (which the etcd store skips) lie between the
		// cursor and the store's revision, and an untruncated page covers
		// them all.
		out.NextCursor = page.Revision
	}
	return writeJSON(w, http.StatusOK, out)
}
