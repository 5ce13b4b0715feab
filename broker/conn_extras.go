package broker

import "github.com/felixmq/felix/fanout"

// ender is an event-stream owner other than a subscription (a roster watch,
// a consumer-group member): end detaches it and releases what it holds; safe to
// call more than once, from any goroutine.
type ender interface{ end() }

// addExtra registers e under id; it counts against MaxSubscriptionsPerConn
// like a subscription, since it costs an event stream and a goroutine.
func (c *conn) addExtra(id uint64, e ender) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.subs)+len(c.mu.extras) >= c.b.cfg.MaxSubscriptionsPerConn {
		return errTooManySubs
	}
	c.mu.extras[id] = e
	return nil
}

func (c *conn) forgetExtra(id uint64) {
	c.mu.Lock()
	delete(c.mu.extras, id)
	c.mu.Unlock()
}

// noteJoined and noteLeft track the roster members this connection owns.
func (c *conn) noteJoined(m membership) {
	c.mu.Lock()
	c.mu.joined[m] = struct{}{}
	c.mu.Unlock()
}

func (c *conn) noteLeft(m membership) {
	c.mu.Lock()
	delete(c.mu.joined, m)
	c.mu.Unlock()
}

// endExtras runs when the connection is gone: every member it joined
// leaves (unless another connection took the name over since), and its
// watches and consumers end (a consumer's unacked records go back to its
// group for redelivery).
func (c *conn) endExtras() {
	c.mu.Lock()
	joined := c.mu.joined
	c.mu.joined = map[membership]struct{}{}
	extras := make([]ender, 0, len(c.mu.extras))
	for _, e := range c.mu.extras {
		extras = append(extras, e)
	}
	c.mu.Unlock()
	for m := range joined {
		m.r.leave(c.b.pool, c, m.member)
	}
	for _, e := range extras {
		e.end()
	}
}

// pool is the broker's buffer pool (shorthand for the roster paths).
func (c *conn) pool() *fanout.Pool { return c.b.pool }
