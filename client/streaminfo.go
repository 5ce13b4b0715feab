package client

import (
	"context"
	"fmt"

	"github.com/felixmq/felix/wire"
)

// StreamInfo is what a broker says of a stream's layout.
type StreamInfo struct {
	// Shards is the stream's width; order holds per shard.
	Shards uint32
	// Routing maps a publish key to its shard (wire.RouteKey).
	Routing wire.Routing
}

// StreamShards asks the broker how wide namespace/stream is, to follow
// every shard of it or to know where a key goes. An unknown stream is a
// *BrokerError matching ErrNotFound; a broker without the stream_shards
// feature gives ErrNotNegotiated.
func (c *Client) StreamShards(ctx context.Context, namespace, stream string) (StreamInfo, error) {
	ct, err := c.openControl(ctx)
	if err != nil {
		return StreamInfo{}, err
	}
	defer func() {
		ct.str.CancelRead(0)
		ct.str.Close()
	}()
	if !ct.features.Has(wire.FeatureStreamShards) {
		return StreamInfo{}, fmt.Errorf("%w: the broker does not answer stream_shards", ErrNotNegotiated)
	}
	m, err := ct.request(ctx, &wire.StreamShards{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream, RequestID: 1})
	if err != nil {
		return StreamInfo{}, err
	}
	view, ok := m.(*wire.StreamShardsView)
	if !ok {
		return StreamInfo{}, fmt.Errorf("%w: %s in reply to stream_shards", ErrProtocol, m.Type())
	}
	info := StreamInfo{Shards: view.Shards}
	if view.Routing != nil {
		if info.Routing, ok = wire.ParseRouting(*view.Routing); !ok {
			return StreamInfo{}, fmt.Errorf("%w: unknown routing %q", ErrProtocol, *view.Routing)
		}
	}
	return info, nil
}
