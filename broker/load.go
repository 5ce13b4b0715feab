package broker

import (
	"sync"
	"time"

	"github.com/felixmq/felix/cluster"
)

// Observed load, for placement (docs/cluster.md): every shard counts the
// payload bytes of the publishes it accepted (shard.bytesIn: one atomic
// add per batch, where the publish metrics are updated), and ShardLoads
// turns the counters into rates since its previous call. cmd/felix-broker
// gives it to the cluster agent, which sends it with each keepalive.
type loadMeter struct {
	mu   sync.Mutex
	at   time.Time         // the previous call (or New)
	last map[*shard]uint64 // bytesIn at the previous call
}

// ShardLoads returns the publish rate, in payload bytes per second since
// the previous call (or since New), of each shard that accepted any and
// that this broker owns under the placement in force (every shard in
// single-broker mode), at least 1; forwarded publishes count at their
// owner. Calls are serialised; the agent makes one per keepalive.
func (b *Broker) ShardLoads() []cluster.ShardLoad {
	b.load.mu.Lock()
	defer b.load.mu.Unlock()
	now := time.Now()
	elapsed := now.Sub(b.load.at).Seconds()
	b.load.at = now
	pv := b.placement.Load()
	next := map[*shard]uint64{}
	out := []cluster.ShardLoad{}
	for _, st := range b.streams.list() {
		for _, sh := range st.shards {
			n := sh.bytesIn.Load()
			next[sh] = n
			d := n - b.load.last[sh]
			if d == 0 || elapsed <= 0 {
				continue
			}
			if pv != nil {
				if r := pv.lookup(st.spec.StreamKey, sh.id); r != nil && !r.self && !r.holds {
					continue
				}
			}
			k := st.spec.StreamKey
			out = append(out, cluster.ShardLoad{
				Shard:       cluster.Shard{Tenant: k.Tenant, Namespace: k.Namespace, Stream: k.Stream, Shard: sh.id},
				BytesPerSec: max(1, int64(float64(d)/elapsed)),
			})
		}
	}
	b.load.last = next
	return out
}
