package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/felixmq/felix/client"
)

// subSwarm is the part of the hostile swarm that subscribes many times and
// never reads an event. conns connections each keep parallel
// subscribes in flight until they have asked perConn times (past the
// per-connection limit, limit, when the broker runs with hostileEnv), and
// hold every subscription they got; one more connection churns, subscribing
// churnBatch at a time and closing them again, until the swarm stops; and
// one feeds the stream they subscribe to, 1 KiB every feedEvery, so that
// their flow-control windows fill and their broker queues reach the
// queue policy.
//
// Subscribing is a round trip for the stream's auth and one for the
// subscribe, so one subscribe at a time on a loaded two-core machine
// manages a few hundred a second under the swarm; it gets more by
// keeping many in flight. Its clients have small stream windows and read
// ahead one frame, so what they absorb before flow control stops the
// broker is ~16 KiB per subscription; their connection window (64 MiB) is
// never what blocks: were it, the connection's control replies would stall
// behind unread events (a 256 KiB window stopped the earlier swarm at
// 73–149 subscribes).
type subSwarm struct {
	addr                            string
	tls                             *tls.Config
	conns, limit, perConn, parallel int
	churnParallel, churnBatch       int
	stream                          string // what they subscribe to
	feedEvery                       time.Duration

	clients []*client.Client // conns holders, the churner, the feeder
	settled chan struct{}    // closed when every holder has asked perConn times

	held, refused, churned, failed, fed atomic.Int64
	refusal                             atomic.Pointer[client.BrokerError] // the broker's refusal at the limit
}

// dial connects every swarm connection. It runs before the handshake
// flood, which takes every connection slot the broker has left.
func (s *subSwarm) dial(ctx context.Context) error {
	for range s.conns + 2 {
		c, err := client.Dial(ctx, s.addr, client.Config{Tenant: "t1", Token: "dev", TLS: s.tls.Clone(),
			StreamReceiveWindow: 16 << 10, ConnectionReceiveWindow: 64 << 20, SubscriptionBuffer: 1})
		if err != nil {
			return fmt.Errorf("subscribe swarm: %w", err)
		}
		s.clients = append(s.clients, c)
	}
	s.settled = make(chan struct{})
	return nil
}

func (s *subSwarm) close() {
	for _, c := range s.clients {
		c.Close()
	}
}

func (s *subSwarm) start(ctx context.Context, wg *sync.WaitGroup) {
	var holders sync.WaitGroup
	for _, c := range s.clients[:s.conns] {
		var asked atomic.Int64
		for range s.parallel {
			holders.Go(func() {
				for asked.Add(1) <= int64(s.perConn) && ctx.Err() == nil {
					if _, err := s.subscribe(ctx, c); err == nil {
						s.held.Add(1)
					}
				}
			})
		}
	}
	wg.Go(func() { holders.Wait(); close(s.settled) })
	wg.Go(func() { s.churn(ctx, s.clients[s.conns]) })
	wg.Go(func() { s.feed(ctx, s.clients[s.conns+1]) })
}

// feed publishes 1 KiB to the swarm's stream every feedEvery, fire and
// forget.
func (s *subSwarm) feed(ctx context.Context, c *client.Client) {
	pub, err := c.NewPublisher(ctx, "default", s.stream)
	if err != nil {
		return
	}
	payload := [][]byte{make([]byte, 1024)}
	t := time.NewTicker(s.feedEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if pub.Send(payload) != nil {
				return
			}
			s.fed.Add(1)
		case <-ctx.Done():
			return
		}
	}
}

// subscribe subscribes once, counting a refusal or a failure.
func (s *subSwarm) subscribe(ctx context.Context, c *client.Client) (*client.Subscription, error) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sub, err := c.Subscribe(sctx, "default", s.stream, client.SubscribeOptions{})
	var be *client.BrokerError
	switch {
	case errors.As(err, &be):
		s.refused.Add(1)
		s.refusal.CompareAndSwap(nil, be)
	case err != nil && ctx.Err() == nil:
		s.failed.Add(1)
	}
	return sub, err
}

// churn subscribes churnBatch at a time and closes them, never reading.
func (s *subSwarm) churn(ctx context.Context, c *client.Client) {
	for ctx.Err() == nil {
		subs := make(chan *client.Subscription, s.churnBatch)
		var batch sync.WaitGroup
		for range s.churnParallel {
			batch.Go(func() {
				for len(subs) < cap(subs) && ctx.Err() == nil {
					if sub, err := s.subscribe(ctx, c); err == nil {
						select {
						case subs <- sub:
							s.churned.Add(1)
						default:
							sub.Close()
						}
					}
				}
			})
		}
		batch.Wait()
		close(subs)
		for sub := range subs {
			sub.Close()
		}
	}
}

func (s *subSwarm) String() string {
	return fmt.Sprintf("%d subscriptions held on %d connections (%d asked each), %d subscribed and closed again, %d refused at the limit, %d failed otherwise; %d KiB fed to their stream",
		s.held.Load(), s.conns, s.perConn, s.churned.Load(), s.refused.Load(), s.failed.Load(), s.fed.Load())
}

// subscriptionStats sums what the broker's stats say of its subscriptions.
type subscriptionStats struct {
	count, maxDepth, capacity int
	dropped                   uint64
}

func brokerSubscriptions(t *testing.T, bp *brokerProcess) subscriptionStats {
	var st struct {
		Connections []struct {
			Subscriptions []struct {
				Capacity int `json:"capacity"`
				Queue    struct {
					Depth   int    `json:"depth"`
					Dropped uint64 `json:"dropped_events"`
				} `json:"queue"`
			} `json:"subscriptions"`
		} `json:"connections"`
	}
	getJSON(t, "http://"+bp.admin+"/debug/felix/stats", &st)
	var s subscriptionStats
	for _, c := range st.Connections {
		for _, sub := range c.Subscriptions {
			s.count++
			s.maxDepth = max(s.maxDepth, sub.Queue.Depth)
			s.capacity = max(s.capacity, sub.Capacity)
			s.dropped += sub.Queue.Dropped
		}
	}
	return s
}
