package broker

import (
	"slices"
)

// connIdentity is who a connection is, for /debug/felix/stats: the
// tenant and subject of the first credential one of its streams presented
// (a connection's streams may authenticate apart, nearly always with the
// same token), and whether it is another broker forwarding publishes.
type connIdentity struct {
	tenant, subject string
	peer            bool
}

// maxConnStreams bounds the stream names a connection's stats list.
const maxConnStreams = 4

// noteAuth records the first principal a stream of c authenticated.
func (c *conn) noteAuth(p Principal, forwarded bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.who.tenant != "" {
		return
	}
	c.mu.who = connIdentity{tenant: p.Tenant(), subject: subjectOf(p), peer: forwarded}
}

// notePublished records a stream c published to, up to maxConnStreams.
func (c *conn) notePublished(stream string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.published) < maxConnStreams && !slices.Contains(c.mu.published, stream) {
		c.mu.published = append(c.mu.published, stream)
	}
}

// subjectOf is the credential's subject, when its kind has one.
func subjectOf(p Principal) string {
	if s, ok := p.(interface{ Subject() string }); ok {
		return s.Subject()
	}
	return ""
}

// Connection roles in ConnectionStats.Role.
const (
	RolePeer       = "peer"       // another broker forwarding publishes
	RolePublisher  = "publisher"  // published, subscribed to nothing
	RoleSubscriber = "subscriber" // subscribed (or watched), published nothing
	RolePubSub     = "publisher+subscriber"
	RoleClient     = "client" // caches, rosters, consumer groups, or nothing yet
)

// identify fills cs's identity: tenant, principal, role and the streams
// the connection publishes to or follows (a few).
func (c *conn) identify(cs *ConnectionStats) {
	c.mu.Lock()
	who, published := c.mu.who, slices.Clone(c.mu.published)
	c.mu.Unlock()
	cs.Tenant, cs.Principal = who.tenant, who.subject
	cs.Streams = published
	for _, s := range cs.Subscriptions {
		name := s.Stream
		if name == "" {
			name = "watch " + s.Watch
		}
		if len(cs.Streams) < maxConnStreams && !slices.Contains(cs.Streams, name) {
			cs.Streams = append(cs.Streams, name)
		}
	}
	switch pub, sub := len(published) > 0, len(cs.Subscriptions) > 0; {
	case who.peer:
		cs.Role = RolePeer
	case pub && sub:
		cs.Role = RolePubSub
	case pub:
		cs.Role = RolePublisher
	case sub:
		cs.Role = RoleSubscriber
	default:
		cs.Role = RoleClient
	}
}
