package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/broker/brokertest"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/devdir"
)

// TestMain serves the examples a broker the way `make run` does: its
// certificate, a token and where it listens in a dev directory of its
// own, which FELIX_DEV_DIR names, so that the examples' code is what a
// program run next to `make run` writes.
func TestMain(m *testing.M) {
	data, err := os.MkdirTemp("", "felix-examples-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(data)
	key := func(s string) broker.StreamKey {
		return broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: s}
	}
	b, stop := brokertest.StartForMain(broker.Config{DataDir: filepath.Join(data, "data")}, brokertest.Options{
		Streams: []broker.StreamSpec{
			{StreamKey: key("demo"), Shards: 1}, {StreamKey: key("orders"), Shards: 2},
			{StreamKey: key("jobs"), Shards: 2, Durable: true, Fsync: "on_commit"},
		},
		Caches: []broker.CacheSpec{{CacheKey: broker.CacheKey{Tenant: "t1", Namespace: "default", Cache: "demo"}}},
	})
	dev := filepath.Join(data, "dev")
	claim, err := devdir.Take(dev)
	if err == nil {
		err = claim.WriteFile(devdir.CertFile, string(b.Cert.PEM), 0o644)
	}
	if err == nil {
		err = claim.WriteFile(devdir.TokenFile, "dev\n", 0o600) // the test broker takes any token
	}
	if err == nil {
		err = claim.WriteBroker(devdir.Broker{PID: os.Getpid(), QUIC: b.Addr})
	}
	if err != nil {
		log.Fatal(err)
	}
	os.Setenv(devdir.DirEnv, dev)
	code := m.Run()
	claim.Release()
	stop()
	os.Exit(code)
}

// dial is what every example starts with: the broker `make run` started,
// with its certificate and token.
func dial(ctx context.Context) *client.Client {
	addr, cfg, err := client.DevConfig(os.Getenv("FELIX_DEV_DIR"))
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(ctx, addr, cfg)
	if err != nil {
		log.Fatal(err)
	}
	return c
}

// Dial connects to a broker and authenticates: a refused token fails
// here. DevConfig reads what `make run` writes for local programs.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr, cfg, err := client.DevConfig(os.Getenv("FELIX_DEV_DIR"))
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(ctx, addr, cfg)
	if err != nil {
		log.Fatal(err) // client.ErrAuth for a refused token, client.ErrConnectionRefused for no broker
	}
	defer c.Close()
	fmt.Println("connected as tenant", cfg.Tenant)
	// Output: connected as tenant t1
}

// An acked publish waits for the broker to take the batch, and says
// where it landed.
func ExamplePublisher_PublishAsync() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(ctx)
	defer c.Close()
	p, err := c.NewPublisher(ctx, "default", "demo")
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	pa := p.PublishAsync([][]byte{[]byte("hello")})
	if err := pa.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	ack := pa.Result()
	fmt.Printf("shard %d offset %d\n", ack.Shard, ack.Offset)
	// Output: shard 0 offset 0
}

// Pipelined publishes keep many batches in flight on one stream and check
// each ack; a key keeps its batches in order in one shard.
func ExamplePublisher_PublishKeyAsync() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(ctx)
	defer c.Close()
	p, err := c.NewPublisher(ctx, "default", "orders")
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	var pending []*client.PendingAck
	for i := range 4 {
		pending = append(pending, p.PublishKeyAsync([]byte("customer-42"), [][]byte{fmt.Appendf(nil, "order %d", i)}))
	}
	shards := map[uint32]bool{}
	for _, pa := range pending {
		if err := pa.Wait(ctx); err != nil {
			log.Fatal(err)
		}
		shards[pa.Result().Shard] = true
	}
	fmt.Println("4 acked, in", len(shards), "shard")
	// Output: 4 acked, in 1 shard
}

// An IdempotentPublisher re-sends what a failure left unanswered and the
// broker writes each batch once: exactly once, across reconnects.
func ExampleIdempotentPublisher() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(ctx)
	defer c.Close()
	p, err := c.NewIdempotentPublisher(ctx, "default", "jobs", client.IdempotentOptions{Shard: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	for i := range 3 {
		ack, err := p.Publish(ctx, [][]byte{fmt.Appendf(nil, "job %d", i)})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("shard %d offset %d\n", ack.Shard, ack.Offset)
	}
	// Output:
	// shard 1 offset 0
	// shard 1 offset 1
	// shard 1 offset 2
}

// A stream is ordered per shard: to see all of it, subscribe to every
// shard the broker says it has.
func ExampleClient_StreamShards() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(ctx)
	defer c.Close()
	p, err := c.NewPublisher(ctx, "default", "orders")
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	for shard := range uint32(2) {
		if err := p.PublishShardAsync(shard, [][]byte{fmt.Appendf(nil, "for shard %d", shard)}).Wait(ctx); err != nil {
			log.Fatal(err)
		}
	}
	info, err := c.StreamShards(ctx, "default", "orders")
	if err != nil {
		log.Fatal(err)
	}
	var got []string
	for shard := range info.Shards {
		s, err := c.Subscribe(ctx, "default", "orders", client.SubscribeOptions{Shard: shard, From: client.Earliest()})
		if err != nil {
			log.Fatal(err)
		}
		for {
			ev, err := s.Next(ctx)
			if err != nil {
				log.Fatal(err)
			}
			if string(ev.Payload) == fmt.Sprintf("for shard %d", shard) {
				got = append(got, fmt.Sprintf("shard %d: %s", shard, ev.Payload))
				break
			}
		}
		s.Close()
	}
	sort.Strings(got)
	fmt.Println(info.Shards, "shards")
	fmt.Println(got)
	// Output:
	// 2 shards
	// [shard 0: for shard 0 shard 1: for shard 1]
}

// A subscriber that keeps the offset after the last event it handled
// resumes there: on a durable stream nothing is lost or repeated.
func ExampleOffset() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(ctx)
	defer c.Close()
	p, err := c.NewPublisher(ctx, "default", "jobs")
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	for i := range 4 {
		if err := p.PublishShardAsync(0, [][]byte{fmt.Appendf(nil, "step %d", i)}).Wait(ctx); err != nil {
			log.Fatal(err)
		}
	}
	next := uint64(2) // saved by an earlier run: it handled offsets 0 and 1
	s, err := c.Subscribe(ctx, "default", "jobs", client.SubscribeOptions{Shard: 0, From: client.Offset(next)})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		ev, err := s.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Offset, string(ev.Payload))
		next = ev.Offset + 1 // save it with what the event changed
	}
	// Output:
	// 2 step 2
	// 3 step 3
}

// Caches hold values by key, with an optional TTL.
func ExampleCache() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(ctx)
	defer c.Close()
	k, err := c.OpenCache(ctx, "default", "demo")
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close(ctx)
	if err := k.Put(ctx, "greeting", []byte("hello"), 5*time.Minute); err != nil {
		log.Fatal(err)
	}
	v, found, err := k.Get(ctx, "greeting")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(v), found)
	existed, err := k.Delete(ctx, "greeting")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted:", existed)
	// Output:
	// hello true
	// deleted: true
}

// A counter is a cache key holding a sum: one round trip adds and returns
// the new value.
func ExampleCache_CounterAdd() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(ctx)
	defer c.Close()
	k, err := c.OpenCache(ctx, "default", "demo")
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close(ctx)
	for _, d := range []int64{5, -2} {
		n, err := k.CounterAdd(ctx, "hits", d)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(n)
	}
	// Output:
	// 5
	// 3
}

// A watch sees a key's current state, then every change of it, in order.
func ExampleClient_Watch() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(ctx)
	defer c.Close()
	k, err := c.OpenCache(ctx, "default", "demo")
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close(ctx)
	if err := k.Put(ctx, "config", []byte("v1"), 0); err != nil {
		log.Fatal(err)
	}
	w, err := c.Watch(ctx, "default", "demo", "config", client.WatchOptions{Current: true})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	if err := k.Put(ctx, "config", []byte("v2"), 0); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		ev, err := w.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Op, string(ev.Value), "current:", ev.Current)
	}
	// Output:
	// put v1 current: true
	// put v2 current: false
}

// A consumer group shares a durable stream's records among its members,
// at least once: a record not acked comes back.
func ExampleClient_Consume() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dial(ctx)
	defer c.Close()
	q, err := c.Consume(ctx, "default", "jobs", "workers", client.QueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	m, err := q.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// ... handle m.Payload, then ack it: it is not redelivered.
	if err := q.Ack(ctx, m.Ref()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("acked; redeliveries:", m.Redeliveries)
	// Output: acked; redeliveries: 0
}
