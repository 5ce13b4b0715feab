package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/wire"
)

// newRoutingClient is a ClusterClient with no connection: enough to drive
// its routing table.
func newRoutingClient(bootstrap string) *ClusterClient {
	cc := &ClusterClient{cfg: ClusterConfig{Config: Config{Tenant: "t"}}}
	cc.mu.clients = map[string]*Client{}
	cc.mu.pubs = map[clusterPubKey]*Publisher{}
	cc.mu.learned = map[cluster.Shard]string{}
	cc.mu.bootstrap = bootstrap
	return cc
}

func shardN(i int) cluster.Shard {
	return cluster.Shard{Tenant: "t", Namespace: "ns", Stream: "s", Shard: i}
}

// placementOf puts shard i on owner[i] ("" leaves it unassigned); members
// named in down are listed but not live.
func placementOf(owners []string, down ...string) *cluster.Placement {
	p := &cluster.Placement{Version: 1}
	seen := map[string]bool{}
	for i, o := range owners {
		if o == "" {
			continue
		}
		p.Assignments = append(p.Assignments, cluster.Assignment{Shard: shardN(i), Owner: o})
		if !seen[o] {
			seen[o] = true
			p.Members = append(p.Members, cluster.Member{ID: o, QUICAddr: o + ":5000", Live: true})
		}
	}
	for i, m := range p.Members {
		for _, d := range down {
			if m.ID == d {
				p.Members[i].Live = false
			}
		}
	}
	return p
}

// A shard routes to its live owner in the placement, else to the owner an
// ack named, else to the bootstrap broker (which forwards and names the
// owner). A new placement replaces what acks taught.
func TestClusterClientRoutes(t *testing.T) {
	cc := newRoutingClient("boot:5000")
	require.Equal(t, "boot:5000", cc.Owner(shardN(0)), "nothing known: the bootstrap broker")

	cc.mu.learned[shardN(0)] = "b2:5000"
	require.Equal(t, "b2:5000", cc.Owner(shardN(0)), "an ack named the owner")

	cc.SetPlacement(placementOf([]string{"b1", "b3", "", "b4"}, "b4"))
	for _, tc := range []struct {
		shard int
		want  string
		why   string
	}{
		{0, "b1:5000", "the placement wins over what acks taught, which it clears"},
		{1, "b3:5000", "placed"},
		{2, "boot:5000", "unassigned: the bootstrap broker"},
		{3, "boot:5000", "owner not live: where the request lands decides (owner_unavailable)"},
		{9, "boot:5000", "not in the placement"},
	} {
		require.Equal(t, tc.want, cc.Owner(shardN(tc.shard)), tc.why)
	}
	require.Empty(t, cc.mu.learned)

	p := placementOf([]string{"b1"})
	p.Members[0].QUICAddr = ""
	cc.SetPlacement(p)
	require.Equal(t, "boot:5000", cc.Owner(shardN(0)), "an owner without an address cannot be dialled")
	cc.SetPlacement(placementOf([]string{"b1", "b3", "", "b4"}, "b4"))

	cc.mu.learned[shardN(2)] = "b5:5000"
	require.Equal(t, "b5:5000", cc.Owner(shardN(2)), "learned where the placement says nothing")
	cc.SetPlacement(nil)
	require.Equal(t, "boot:5000", cc.Owner(shardN(0)), "no placement, nothing learned")
}

// doneAck is an ack as ClusterClient's hook sees it.
func doneAck(err error, owner *wire.Owner) *PendingAck {
	pa := &PendingAck{done: make(chan struct{}), err: err}
	if owner != nil {
		pa.res.Owner, pa.res.Named = *owner, true
	}
	close(pa.done)
	return pa
}

// What an ack or a refusal teaches: an owner named by an ack or by a
// not_owner refusal becomes the route; a failed connection forgets what
// was learned about that broker and its publishers (the next publish
// re-routes); any other refusal by the broker changes nothing.
func TestClusterClientLearnsFromAcks(t *testing.T) {
	owner := &wire.Owner{ID: "b2", Addr: "b2:5000"}
	for _, tc := range []struct {
		name    string
		ack     *PendingAck
		learned string // the route of shard 0 afterwards ("" = none learned)
		forgot  bool   // the publisher on the broker that answered is gone
	}{
		{name: "ack naming the owner", ack: doneAck(nil, owner), learned: "b2:5000"},
		{name: "not_owner naming the owner", ack: doneAck(&BrokerError{Message: "not_owner: shard 0", Owner: owner, Err: wire.NewTypedError(wire.CodeNotLeader)}, owner), learned: "b2:5000"},
		{name: "ack naming no owner", ack: doneAck(nil, nil)},
		{name: "owner_unavailable keeps the route", ack: doneAck(&BrokerError{Message: "owner_unavailable: down", Err: wire.NewTypedError(wire.CodeShardUnavailable)}, owner)},
		{name: "refused for another reason", ack: doneAck(&BrokerError{Message: "forbidden", Err: wire.NewTypedError(wire.CodeForbidden)}, nil)},
		{name: "capability missing", ack: doneAck(fmt.Errorf("%w: shard publishes", ErrNotNegotiated), nil)},
		{name: "connection failed", ack: doneAck(errors.New("stream reset"), nil), forgot: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := newRoutingClient("boot:5000")
			key := clusterPubKey{"boot:5000", "ns", "s"}
			cc.mu.pubs[key] = &Publisher{}
			other := shardN(7)
			cc.mu.learned[other] = "boot:5000" // learned earlier, same broker
			cc.learn(shardN(0), "boot:5000", tc.ack)
			got, ok := cc.mu.learned[shardN(0)]
			require.Equal(t, tc.learned != "", ok)
			require.Equal(t, tc.learned, got)
			_, kept := cc.mu.pubs[key]
			require.Equal(t, !tc.forgot, kept, "publisher on the failed broker")
			_, keptOther := cc.mu.learned[other]
			require.Equal(t, !tc.forgot, keptOther, "routes learned to the failed broker")
		})
	}
}

// Forgetting a broker drops only what concerns it.
func TestClusterClientForgetsOneBroker(t *testing.T) {
	cc := newRoutingClient("boot:5000")
	cc.mu.pubs[clusterPubKey{"b1:5000", "ns", "s"}] = &Publisher{}
	cc.mu.pubs[clusterPubKey{"b2:5000", "ns", "s"}] = &Publisher{}
	cc.mu.learned[shardN(0)] = "b1:5000"
	cc.mu.learned[shardN(1)] = "b2:5000"
	cc.forgetLocked("b1:5000")
	require.Equal(t, map[cluster.Shard]string{shardN(1): "b2:5000"}, cc.mu.learned)
	require.Len(t, cc.mu.pubs, 1)
	_, ok := cc.mu.pubs[clusterPubKey{"b2:5000", "ns", "s"}]
	require.True(t, ok)
}

// A closed ClusterClient dials nothing, and one without a bootstrap broker
// is a configuration error.
func TestClusterClientRefusals(t *testing.T) {
	cc := newRoutingClient("boot:5000")
	require.NoError(t, cc.Close())
	_, err := cc.clientLocked(context.Background(), "b1:5000")
	require.ErrorIs(t, err, ErrClosed)
	_, err = DialCluster(context.Background(), ClusterConfig{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Equal(t, shardN(3), cc.shard("ns", "s", 3), "shards are named in the client's tenant")
}
