package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

// BenchmarkGroupDrain is the published Felix's queue figure: publish b.N
// records to a durable stream (untimed), then drain them with one group of
// one member that acks every record (asynchronously, 64 offsets per ack
// frame, the last ack waited for until durable). Reports msg/s.
func BenchmarkGroupDrain(b *testing.B) {
	for _, size := range []int{0, 256, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			h := serveBroker(b, broker.Config{DataDir: b.TempDir()}, durableSpec("jobs", "periodic"))
			ctx := ctxT(b, 10*time.Minute)
			pub, err := h.dial(b).NewPublisher(ctx, "default", "jobs")
			require.NoError(b, err)
			payload := make([]byte, size)
			batch := make([][]byte, 0, 256)
			for i := 0; i < b.N; i += len(batch) {
				batch = batch[:0]
				for j := i; j < b.N && len(batch) < cap(batch); j++ {
					batch = append(batch, payload)
				}
				require.NoError(b, pub.PublishBatch(ctx, batch))
			}
			q, err := h.dial(b).Consume(ctx, "default", "jobs", "drain", client.QueueOptions{Member: "m", MaxInflight: 1024})
			require.NoError(b, err)
			b.SetBytes(int64(size))
			b.ResetTimer()
			start := time.Now()
			pending := make([]client.QueueRef, 0, 64)
			for n := 0; n < b.N; n++ {
				msg, err := q.Next(ctx)
				require.NoError(b, err)
				pending = append(pending, msg.Ref())
				if len(pending) == cap(pending) {
					require.NoError(b, q.AckAsync(pending...))
					pending = pending[:0]
				}
			}
			pending = append(pending, client.QueueRef{Offset: uint64(b.N - 1)}) // re-acking is harmless; waits for durability
			require.NoError(b, q.Ack(ctx, pending...))
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
		})
	}
}

// BenchmarkRosterLateJoiner is the published Felix's roster figure: with
// N members present, the time from a late watcher's roster_watch (on an
// open connection) until it holds the complete state (the whole snapshot).
func BenchmarkRosterLateJoiner(b *testing.B) {
	for _, n := range []int{100, 1000, 10_000} {
		b.Run(fmt.Sprintf("%dmembers", n), func(b *testing.B) {
			h := startBroker(b, broker.Config{})
			ctx := ctxT(b, 10*time.Minute)
			r, err := h.dial(b).Roster(ctx, "default", "big")
			require.NoError(b, err)
			meta := []byte(`{"zone":"eu-1"}`)
			for i := range n {
				require.NoError(b, r.Join(ctx, fmt.Sprintf("member-%05d", i), meta))
			}
			late, err := h.dial(b).Roster(ctx, "default", "big")
			require.NoError(b, err)
			b.ResetTimer()
			for range b.N {
				w, err := late.Watch(ctx)
				require.NoError(b, err)
				ev, err := w.Next(ctx)
				require.NoError(b, err)
				if ev.Kind != client.RosterSnapshotEvent || len(ev.Members) != n {
					b.Fatalf("got %v with %d members, want a snapshot of %d", ev.Kind, len(ev.Members), n)
				}
				b.StopTimer()
				w.Close()
				b.StartTimer()
			}
		})
	}
}
