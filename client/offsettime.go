package client

import (
	"context"
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// OffsetForTime returns the first offset of a durable stream's shard whose
// record was appended at or after t (the broker's clock at append); found
// is false when no record is that recent yet (subscribe at Latest to wait
// for one). A time older than everything the shard holds answers its
// oldest record. The broker must serve wire.FeatureRecordTimestamps.
func (c *Client) OffsetForTime(ctx context.Context, namespace, stream string, shard uint32, t time.Time) (offset uint64, found bool, err error) {
	ct, err := c.openControl(ctx)
	if err != nil {
		return 0, false, err
	}
	defer ct.str.Close()
	defer ct.str.CancelRead(0)
	if !ct.features.Has(wire.FeatureRecordTimestamps) {
		return 0, false, fmt.Errorf("%w: the broker does not answer offset_for_time", ErrNotNegotiated)
	}
	r, err := ct.request(ctx, &wire.OffsetForTime{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream, Shard: shard,
		AtMicros: uint64(max(t.UnixMicro(), 0)), RequestID: 1})
	if err != nil {
		return 0, false, err
	}
	v, ok := r.(*wire.OffsetValue)
	if !ok {
		return 0, false, fmt.Errorf("%w: %s in reply to offset_for_time", ErrProtocol, r.Type())
	}
	if v.Offset == nil {
		return 0, false, nil
	}
	return *v.Offset, true, nil
}

// At starts at the first event appended at or after t (resolved with
// OffsetForTime when the subscription opens; Latest when nothing is that
// recent yet).
func At(t time.Time) From { return From{at: t, set: true} }

// resolve turns an At start into an offset on the stream's shard.
func (f From) resolve(ctx context.Context, c *Client, namespace, stream string, shard uint32) (From, error) {
	if f.at.IsZero() {
		return f, nil
	}
	off, found, err := c.OffsetForTime(ctx, namespace, stream, shard, f.at)
	switch {
	case err != nil:
		return f, err
	case !found:
		return Latest(), nil
	}
	return Offset(off), nil
}
