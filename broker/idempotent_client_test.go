package broker_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

// TestIdempotentPublisherSurvivesConnectionResets: the SDK's idempotent
// publisher keeps 64 batches in flight while its connection is reset again
// and again mid-publish; it redials and sends every unanswered batch again
// under the same sequence. Every batch is in the log exactly once, in
// order, and every ack's offset is its batch's.
func TestIdempotentPublisherSurvivesConnectionResets(t *testing.T) {
	for _, spec := range []broker.StreamSpec{durableSpec("idem", "on_commit"), {StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "idem"}, Shards: 2}} {
		t.Run(map[bool]string{true: "durable", false: "ephemeral"}[spec.Durable], func(t *testing.T) {
			h := serveBroker(t, broker.Config{DataDir: t.TempDir(), RingEvents: 4096}, spec)
			ctx := ctxT(t, 60*time.Second)
			var mu sync.Mutex
			var current *client.Client
			redial := func(ctx context.Context, _ string) (*client.Client, error) {
				c, err := client.Dial(ctx, h.addr, client.Config{Tenant: "t1", Token: "dev", TLS: h.clientTLS})
				if err == nil {
					mu.Lock()
					current = c
					mu.Unlock()
				}
				return c, err
			}
			first := h.dial(t)
			current = first
			pub, err := first.NewIdempotentPublisher(ctx, "default", "idem", client.IdempotentOptions{Shard: uint32(spec.Shards - 1), Redial: redial})
			require.NoError(t, err)

			const batches = 1500
			pas := make([]*client.PendingAck, batches)
			for i := range batches {
				pas[i] = pub.PublishAsync(ctx, nil, [][]byte{binary.BigEndian.AppendUint64(nil, uint64(i)), []byte("second")})
				if i%150 == 75 {
					mu.Lock()
					current.Conn().CloseWithError(0x42, "reset mid-publish")
					mu.Unlock()
				}
			}
			for i, pa := range pas {
				require.NoError(t, pa.Wait(ctx), "batch %d", i)
				res := pa.Result()
				require.True(t, res.HasOffset && res.HasShard)
				require.Equal(t, uint64(2*i), res.Offset, "batch %d", i)
				require.Equal(t, uint32(spec.Shards-1), res.Shard)
			}
			require.NoError(t, pub.Close(ctx))
			require.Positive(t, pub.Reconnects())
			t.Logf("%d batches, %d reconnects, %d batches sent again", batches, pub.Reconnects(), pub.Resends())

			sub, err := h.dial(t).Subscribe(ctx, "default", "idem", client.SubscribeOptions{From: client.Earliest(), Shard: uint32(spec.Shards - 1)})
			require.NoError(t, err)
			for i := range 2 * batches {
				ev, err := sub.Next(ctx)
				require.NoError(t, err)
				require.Equal(t, uint64(i), ev.Offset)
				if i%2 == 0 {
					require.Equal(t, uint64(i/2), binary.BigEndian.Uint64(ev.Payload), fmt.Sprintf("offset %d", i))
				}
			}
			// Nothing after: the next batch is at 2×batches.
			pub2, err := h.dial(t).NewIdempotentPublisher(ctx, "default", "idem", client.IdempotentOptions{Shard: uint32(spec.Shards - 1)})
			require.NoError(t, err)
			res, err := pub2.Publish(ctx, [][]byte{[]byte("last")})
			require.NoError(t, err)
			require.Equal(t, uint64(2*batches), res.Offset)
		})
	}
}
