package forward

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
)

// deadOwner is a loopback address nothing answers on.
func deadOwner(t *testing.T) cluster.Member {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := pc.LocalAddr().String()
	require.NoError(t, pc.Close())
	return cluster.Member{ID: "b9", QUICAddr: addr, Live: true}
}

// forward runs one Forward and returns what done got.
func forward(f *Forwarder, owner cluster.Member, acked bool) error {
	got := make(chan error, 1)
	f.Forward(owner, cluster.Shard{Tenant: "t", Namespace: "ns", Stream: "s", Shard: 1}, [][]byte{[]byte("x")}, acked,
		func(_ uint64, _ bool, err error) { got <- err })
	return <-got
}

// An owner that cannot be reached fails the publish with
// cluster.ErrOwnerUnavailable naming it; within RetryAfter of a failed dial
// later forwards fail at once without dialling again (a dead owner does not
// hold up every publish for a dial timeout); after Close every forward
// fails. done is called exactly once each time.
func TestForwardToAnUnreachableOwner(t *testing.T) {
	owner := deadOwner(t)
	f := New(Config{TLS: &tls.Config{InsecureSkipVerify: true}, Token: "node", DialTimeout: 300 * time.Millisecond,
		RetryAfter: time.Minute})
	err := forward(f, owner, true)
	require.ErrorIs(t, err, cluster.ErrOwnerUnavailable)
	require.ErrorContains(t, err, "b9 ("+owner.QUICAddr+")")

	start := time.Now()
	for _, acked := range []bool{true, false} {
		err = forward(f, owner, acked)
		require.ErrorIs(t, err, cluster.ErrOwnerUnavailable)
		require.ErrorContains(t, err, "recent dial failed")
	}
	require.Less(t, time.Since(start), 300*time.Millisecond, "no second dial within RetryAfter")

	require.NoError(t, f.Close())
	require.ErrorIs(t, forward(f, owner, true), cluster.ErrOwnerUnavailable)
	require.ErrorContains(t, forward(f, owner, false), "closed")
}
