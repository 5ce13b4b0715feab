// Package cptest serves a control plane for tests: a memory store and a
// placer, over real HTTP, admitting one bootstrap token.
package cptest

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/controlplane"
)

// Start serves a control plane with placer config pc that admits the
// bearer token; the test's cleanup stops it. It returns the base URL and
// the store.
func Start(t testing.TB, token string, pc controlplane.PlacerConfig) (string, *controlplane.MemoryStore) {
	st, err := controlplane.NewMemoryStore(controlplane.MemoryConfig{})
	require.NoError(t, err)
	placer, err := controlplane.NewPlacer(st, pc)
	require.NoError(t, err)
	auth, err := controlplane.NewBootstrapAuthorizer(token)
	require.NoError(t, err)
	srv, err := controlplane.New(controlplane.Config{Store: st, Authorizer: auth, Placer: placer})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close(); placer.Close(); st.Close() })
	return hs.URL, st
}
