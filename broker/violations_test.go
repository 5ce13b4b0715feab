package broker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/wire"
)

// The protocol-violation count is for frames no correct client sends: a
// client that refuses nothing but gets refusals (an unknown stream, a
// queue on an ephemeral stream), and clients that close their connection
// while their streams are open (a subscriber, an idempotent publisher, a
// queue consumer, a roster watch), count nothing; a malformed frame
// counts one.
func TestProtocolViolationsCountOnlyViolations(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, demo, durableSpec("jobs", "never"))
	ctx := ctxT(t, 20*time.Second)
	violations := func() float64 {
		v, _ := scrape(t, h.b).Value("felix_protocol_violations_total", nil)
		return v
	}

	c := h.dial(t)
	_, err := c.Subscribe(ctx, "default", "nope", client.SubscribeOptions{})
	require.ErrorIs(t, err, client.ErrNotFound)
	_, err = c.Consume(ctx, "default", "demo", "g", client.QueueOptions{})
	require.Error(t, err)

	c = h.dial(t)
	_, err = c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
	require.NoError(t, err)
	ip, err := c.NewIdempotentPublisher(ctx, "default", "jobs", client.IdempotentOptions{})
	require.NoError(t, err)
	_, err = ip.Publish(ctx, [][]byte{[]byte("job")})
	require.NoError(t, err)
	q, err := c.Consume(ctx, "default", "jobs", "g", client.QueueOptions{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	require.NoError(t, err)
	r, err := c.Roster(ctx, "default", "lobby")
	require.NoError(t, err)
	_, err = r.Watch(ctx)
	require.NoError(t, err)
	p, err := c.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	require.NoError(t, p.Publish(ctx, []byte("x")))
	require.NoError(t, c.Close()) // every stream above is still open
	require.Zero(t, violations(), "refusals and closed connections are not violations")

	gotError, err := sendOn(ctx, h.rawConn(t), wire.AppendJSONFrame(nil, &wire.Auth{TenantID: "t1", Token: "dev"}))
	require.NoError(t, err)
	require.True(t, gotError, "a second auth is refused")
	require.Eventually(t, func() bool { return violations() == 1 }, 5*time.Second, 10*time.Millisecond)
}
