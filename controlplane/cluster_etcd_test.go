package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
)

// Two control planes on one etcd, each with its own placer, recompute
// every change and agree: both serve the same placement at the same
// version, whichever of them took the registration or the stream. A
// member registered through A lapses even after A is gone (the lease is
// etcd's), and B moves its shards.
func TestEtcdTwoPlanesAgreeOnPlacement(t *testing.T) {
	prefix := etcdPrefix()
	a := newClusterInstance(t, etcdStore(t, prefix), time.Second)
	b := newClusterInstance(t, etcdStore(t, prefix), time.Second)
	a.seed(t)
	b.register(t, "b-keep")
	stop := make(chan struct{})
	defer close(stop)
	go keepAlive(stop, b.url, "b-keep", 500*time.Millisecond)
	a.register(t, "a-gone")
	b.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"s","shards":6}`)
	pa := a.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return len(p.Assignments) == 6 && len(p.Members) == 2 })
	pb := b.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return p.Version >= pa.Version })
	require.Equal(t, pa, pb)
	require.Equal(t, map[string]int{"a-gone": 3, "b-keep": 3}, ownerCounts(pa))

	// A dies (API, placer, store); its member gets no keepalive and its
	// lease lapses in etcd.
	a.srv.Close()
	a.srv.placer.Close()
	a.srv.store.Close()
	p := b.awaitPlacement(t, 6*time.Second, func(p cluster.Placement) bool { return len(p.Members) == 1 })
	require.Equal(t, map[string]int{"b-keep": 6}, ownerCounts(p))
}

// keepAlive renews id's lease through url every period until stop closes.
func keepAlive(stop chan struct{}, url, id string, period time.Duration) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(period):
			if resp, err := rawPost(url+"/v1/members/"+id+"/keepalive", ""); err == nil {
				resp.Body.Close()
			}
		}
	}
}

// Concurrent placers on one etcd: many changes in a row through both, and
// at the end one stored placement equal to Place of the final state.
func TestEtcdPlacersConvergeUnderConcurrentChanges(t *testing.T) {
	prefix := etcdPrefix()
	a := newClusterInstance(t, etcdStore(t, prefix), 5*time.Second)
	b := newClusterInstance(t, etcdStore(t, prefix), 5*time.Second)
	a.seed(t)
	for i := range 6 {
		in := []*instance{a, b}[i%2]
		in.register(t, fmt.Sprintf("m%d", i))
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, fmt.Sprintf(`{"stream":"s%d","shards":%d}`, i, i+1))
	}
	want := func(p cluster.Placement) bool { return len(p.Members) == 6 && len(p.Assignments) == 21 }
	pa := a.awaitPlacement(t, 5*time.Second, want)
	pb := b.awaitPlacement(t, 5*time.Second, func(p cluster.Placement) bool { return p.Version >= pa.Version })
	require.Equal(t, pa, pb)
	for id, n := range ownerCounts(pa) {
		require.InDelta(t, 3.5, n, 0.5, "member %s", id)
	}
}

// SwapPlacement is a compare-and-swap on the stored version, on each
// backend.
func TestSwapPlacementConflicts(t *testing.T) {
	forEachClusterBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		ms := open(t).(MemberStore)
		ctx := context.Background()
		p := cluster.Placement{Members: []cluster.Member{{ID: "a", QUICAddr: "h:1", Live: true}}}
		v1, err := ms.SwapPlacement(ctx, 0, p)
		require.NoError(t, err)
		_, err = ms.SwapPlacement(ctx, 0, p)
		require.ErrorIs(t, err, ErrConflict)
		v2, err := ms.SwapPlacement(ctx, v1, p)
		require.NoError(t, err)
		require.Greater(t, v2, v1)
		got, err := ms.Placement(ctx)
		require.NoError(t, err)
		require.Equal(t, v2, got.Version)
		require.Equal(t, p.Members, got.Members)
	})
}
