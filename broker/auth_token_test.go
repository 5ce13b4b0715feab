package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

// tokenRig is a broker verifying real Felix EdDSA tokens (auth.Verifier
// over the minter's keys, as a broker's cached key source would serve
// them) for tenants t1 and t2.
type tokenRig struct {
	h      *harness
	minter *auth.Minter
	ttl    time.Duration
}

func newTokenRig(t *testing.T, ttl time.Duration) *tokenRig {
	m, err := auth.NewMinter(auth.MinterConfig{TTL: ttl, ClockSkew: time.Millisecond})
	require.NoError(t, err)
	for _, tenant := range []string{"t1", "t2"} {
		require.NoError(t, m.AddTenant(tenant))
	}
	v, err := auth.NewVerifier(auth.VerifierConfig{Keys: m, ClockSkew: time.Millisecond})
	require.NoError(t, err)
	t2 := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t2", Namespace: "default", Stream: "demo"}, Shards: 1}
	h := startBroker(t, broker.Config{Verifier: broker.TokenVerifier{V: v, ClockSkew: time.Millisecond}}, demo, t2)
	return &tokenRig{h: h, minter: m, ttl: ttl}
}

// dial connects as tenant with a token granting perms.
func (r *tokenRig) dial(t *testing.T, tenant string, perms ...auth.Permission) *client.Client {
	tok, _, err := r.minter.Mint(tenant, "alice", perms)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, r.h.addr, client.Config{Tenant: tenant, Token: tok, TLS: r.h.clientTLS})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func perm(a, res string) auth.Permission {
	return auth.Permission{Action: auth.Action(a), Resource: res}
}

// Brokers verify tokens locally (docs/design.md, "Data paths", Auth): the token's permissions decide each
// operation, with the missing permission named; a token for tenant t1
// cannot touch t2; a bad token is refused with its reason.
func TestTokenPermissionsDecideEachOperation(t *testing.T) {
	r := newTokenRig(t, time.Minute)
	ctx := ctxT(t, 20*time.Second)
	pubOnly := r.dial(t, "t1", perm("stream.publish", "t1/default/*"))
	p, err := pubOnly.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	require.NoError(t, p.Publish(ctx, []byte("allowed")))
	_, err = pubOnly.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
	var be *client.BrokerError
	require.ErrorAs(t, err, &be)
	require.Contains(t, be.Message, "forbidden")
	require.Contains(t, be.Message, "stream.subscribe")

	sub := r.dial(t, "t1", perm("stream.subscribe", "t1/default/demo"))
	_, err = sub.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
	require.NoError(t, err)

	// A t1 token presented for tenant t2 is refused at auth, which Dial
	// does: a bad token fails there, not at the first operation.
	tok, _, err := r.minter.Mint("t1", "mallory", []auth.Permission{perm("admin", "t1/*/*")})
	require.NoError(t, err)
	_, err = client.Dial(ctx, r.h.addr, client.Config{Tenant: "t2", Token: tok, TLS: r.h.clientTLS})
	require.ErrorIs(t, err, client.ErrAuth)
	require.ErrorContains(t, err, "tenant")

	for name, bad := range map[string]string{"garbage": "not-a-jwt", "tampered": tok[:len(tok)-4] + "AAAA"} {
		_, err := client.Dial(ctx, r.h.addr, client.Config{Tenant: "t1", Token: bad, TLS: r.h.clientTLS})
		require.ErrorIs(t, err, client.ErrAuth, name)
	}
}

// When a token expires, the streams it authenticated end with a
// clear error: the control stream says "token expired", the subscription's
// event stream is reset with the auth code; a new token works.
func TestTokenExpiryEndsItsStreams(t *testing.T) {
	r := newTokenRig(t, 1500*time.Millisecond)
	ctx := ctxT(t, 20*time.Second)
	c := r.dial(t, "t1", perm("stream.publish", "t1/*/*"), perm("stream.subscribe", "t1/*/*"))
	pub, err := c.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	sub, err := c.Subscribe(ctx, "default", "demo", client.SubscribeOptions{})
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, []byte("before expiry")))
	_, err = sub.Next(ctx)
	require.NoError(t, err)

	start := time.Now()
	_, err = sub.Next(ctx) // nothing more is published: this ends at expiry
	require.Error(t, err)
	var se *quic.StreamError
	require.True(t, errors.As(err, &se), "a stream reset, not a timeout: %v", err)
	require.EqualValues(t, 0x11, se.ErrorCode, "the auth code")
	require.Less(t, time.Since(start), 3*time.Second)

	// The publisher's stream expired at the same instant (its timer may
	// fire a moment after the subscription's).
	require.Eventually(t, func() bool { return pub.Err() != nil }, time.Second, 5*time.Millisecond)
	require.ErrorContains(t, pub.Err(), "token expired")
	require.Error(t, pub.Publish(ctx, []byte("after expiry")))

	fresh := r.dial(t, "t1", perm("stream.publish", "t1/*/*"))
	p2, err := fresh.NewPublisher(ctx, "default", "demo")
	require.NoError(t, err)
	require.NoError(t, p2.Publish(ctx, []byte("new token")))
}
