package broker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Catalog creates streams and caches where they are kept (the control
// plane a broker follows); the broker serves them once that catalog tells
// it, as it does for anything created there directly.
type Catalog interface {
	CreateStream(ctx context.Context, spec StreamSpec) error
	CreateCache(ctx context.Context, spec CacheSpec) error
}

// ErrCatalogElsewhere: streams and caches are created at the catalog
// itself (an external control plane), not through this broker. A
// Catalog's refusal wraps it and says where to go.
var ErrCatalogElsewhere = errors.New("streams and caches belong to the control plane")

// catalogWait bounds how long a create through the catalog waits for the
// broker to serve what it created.
const catalogWait = 10 * time.Second

// createStream creates spec through Config.Catalog, then waits until this
// broker serves it; without a catalog, in this broker alone. A durable
// stream this broker cannot keep is refused first, whatever the catalog.
func (b *Broker) createStream(ctx context.Context, spec StreamSpec) error {
	if b.cfg.Catalog == nil {
		return b.CreateStream(spec)
	}
	if err := spec.validate(); err != nil {
		return err
	}
	if spec.Durable && b.cfg.DataDir == "" {
		return ErrNoDataDir
	}
	if err := b.cfg.Catalog.CreateStream(ctx, spec); err != nil {
		return err
	}
	return b.awaitServed(ctx, "stream "+spec.String(), func() bool {
		_, err := b.streams.lookup(spec.StreamKey)
		return err == nil
	})
}

// createCache is createStream for caches.
func (b *Broker) createCache(ctx context.Context, spec CacheSpec) error {
	if b.cfg.Catalog == nil {
		return b.CreateCache(spec)
	}
	if spec.Durable && b.cfg.DataDir == "" {
		return ErrNoDataDir
	}
	if err := b.cfg.Catalog.CreateCache(ctx, spec); err != nil {
		return err
	}
	return b.awaitServed(ctx, "cache "+spec.CacheKey.String(), func() bool {
		_, err := b.caches.lookup(spec.CacheKey)
		return err == nil
	})
}

// awaitServed polls served until it holds: the catalog's feed reaches this
// broker within a long-poll round trip.
func (b *Broker) awaitServed(ctx context.Context, what string, served func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, catalogWait)
	defer cancel()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !served() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s was created in the control plane but this broker does not serve it after %v (its log says why)", what, catalogWait)
		case <-t.C:
		}
	}
	return nil
}
