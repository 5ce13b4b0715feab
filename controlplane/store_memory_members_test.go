package controlplane

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/cluster"
)

// The memory store's emulated lease: a member lapses exactly TTL after its
// last keepalive, with no request to notice it (the timer wakes Notify),
// and a keepalive after the lapse is ErrNotFound.
func TestMemoryLeaseLapsesOnItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := NewMemoryStore(MemoryConfig{})
		require.NoError(t, err)
		defer st.Close()
		ctx := context.Background()
		_, err = st.Register(ctx, cluster.Member{ID: "a", QUICAddr: "h:1"}, 3*time.Second)
		require.NoError(t, err)
		_, err = st.Register(ctx, cluster.Member{ID: "b", QUICAddr: "h:2"}, 5*time.Second)
		require.NoError(t, err)

		time.Sleep(2 * time.Second)
		_, err = st.KeepAlive(ctx, "a", nil) // a now lapses at 5s, with b
		require.NoError(t, err)
		changed, err := st.Notify(ctx)
		require.NoError(t, err)
		start := time.Now()
		<-changed
		require.Equal(t, 3*time.Second, time.Since(start), "both lapse at 5s, woken by the timer alone")
		members, err := st.Members(ctx)
		require.NoError(t, err)
		require.Empty(t, members)
		_, err = st.KeepAlive(ctx, "a", nil)
		require.ErrorIs(t, err, ErrNotFound)
	})
}
