package broker

import (
	"fmt"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/wire"
)

// offsetForTime answers offset_for_time: the first offset of a durable
// shard whose record was appended at or after at_micros, below the
// committed tail (what a subscriber may read), searched over the log's
// index and record timestamps (segment.Log.OffsetForTime). It needs
// stream.subscribe, since the answer is a place to subscribe from.
func (ct *control) offsetForTime(m *wire.OffsetForTime) bool {
	k := streamKey(m.TenantID, m.Namespace, m.Stream)
	if err := ct.authorize(k.Tenant, auth.ActionSubscribe, streamResource(k)); err != nil {
		ct.fail(err)
		return false
	}
	off, found, err := ct.lookupTime(k, m)
	if err != nil {
		ct.fail(err)
		return true
	}
	reply := &wire.OffsetValue{RequestID: m.RequestID}
	if found {
		reply.Offset = &off
	}
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, reply) })
	return true
}

func (ct *control) lookupTime(k StreamKey, m *wire.OffsetForTime) (uint64, bool, error) {
	st, err := ct.broker().streams.lookup(k)
	if err != nil {
		return 0, false, err
	}
	if !st.spec.Durable {
		return 0, false, fmt.Errorf("%w: stream %s is in memory and stores no times", ErrInvalidRequest, k)
	}
	if int64(m.Shard) >= int64(len(st.shards)) {
		return 0, false, fmt.Errorf("%w: shard %d not in [0, %d) for %s", ErrInvalidRequest, m.Shard, len(st.shards), k)
	}
	if err := ct.broker().servesShard(k, int(m.Shard)); err != nil {
		return 0, false, err
	}
	sh := st.shards[m.Shard]
	log, err := sh.readLog()
	if err != nil {
		return 0, false, err
	}
	off, found, err := log.OffsetForTime(int64(min(m.AtMicros, 1<<63-1)), sh.tail())
	if err != nil {
		return 0, false, ct.broker().checkStorage(shardName(k, int(m.Shard)), 0, err)
	}
	return off, found, nil
}
