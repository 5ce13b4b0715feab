package endpoint

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/devdir"
)

func env(kv map[string]string) devdir.Lookup {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

// The environment wins over the context in effect, which wins over what a
// broker wrote into the dev directory, which wins over the defaults; each
// value says where it came from.
func TestResolvePrecedence(t *testing.T) {
	home, dev := t.TempDir(), filepath.Join(t.TempDir(), "dev")
	vars := map[string]string{"HOME": home, devdir.DirEnv: dev}

	ep, err := Resolve(env(vars))
	require.NoError(t, err)
	require.Equal(t, Value{DefaultAddr, "default"}, ep.Addr)
	require.Equal(t, Value{DefaultTenant, "default"}, ep.Tenant)
	require.Equal(t, filepath.Join(dev, devdir.CertFile), ep.CA.V)

	c, err := devdir.Take(dev)
	require.NoError(t, err)
	defer c.Release()
	require.NoError(t, c.WriteBroker(devdir.Broker{PID: 1, QUIC: "127.0.0.1:15000", Admin: "127.0.0.1:18080", ControlPlane: "http://127.0.0.1:7"}))
	ep, err = Resolve(env(vars))
	require.NoError(t, err)
	brokerFile := filepath.Join(dev, devdir.BrokerFile)
	require.Equal(t, Value{"127.0.0.1:15000", brokerFile}, ep.Addr)
	require.Equal(t, Value{"127.0.0.1:18080", brokerFile}, ep.Admin)
	require.Equal(t, Value{"http://127.0.0.1:7", brokerFile}, ep.ControlPlane)

	st := StoreFor(env(vars))
	require.Equal(t, filepath.Join(home, ".config", "felix"), st.Dir)
	require.NoError(t, st.Save("prod", Context{Addr: "broker.example.com:5000", TokenFile: "/etc/t", Tenant: "payments"}))
	require.NoError(t, st.Select("prod"))
	ep, err = Resolve(env(vars))
	require.NoError(t, err)
	require.Equal(t, "prod", ep.Context)
	require.Equal(t, Value{"broker.example.com:5000", "context prod"}, ep.Addr)
	require.Equal(t, Value{"127.0.0.1:18080", brokerFile}, ep.Admin, "what the context leaves out")
	require.Equal(t, Value{"/etc/t", "context prod"}, ep.TokenFile)
	require.Equal(t, Value{"payments", "context prod"}, ep.Tenant)

	vars[AddrEnv] = "10.0.0.1:5000"
	ep, err = Resolve(env(vars))
	require.NoError(t, err)
	require.Equal(t, Value{"10.0.0.1:5000", AddrEnv}, ep.Addr)

	vars[ContextEnv] = "nope"
	_, err = Resolve(env(vars))
	require.ErrorIs(t, err, ErrNoContext)
	require.ErrorContains(t, err, `context "nope" (FELIX_CONTEXT)`)
}

// Contexts are saved, listed, selected and removed by name; a removed
// selected context is unselected; names cannot escape the directory.
func TestContextStore(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	names, err := st.List()
	require.NoError(t, err)
	require.Empty(t, names)
	require.NoError(t, st.Save("b", Context{Addr: "b:1"}))
	require.NoError(t, st.Save("a", Context{Addr: "a:1"}))
	names, err = st.List()
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, names)
	require.ErrorIs(t, st.Select("c"), ErrNoContext)
	require.NoError(t, st.Select("b"))
	require.Equal(t, "b", st.Selected())
	require.NoError(t, st.Remove("b"))
	require.Empty(t, st.Selected())
	require.Error(t, st.Save("../x", Context{}))
	require.Error(t, st.Save("", Context{}))
	require.Error(t, Store{}.Save("a", Context{}), "no configuration directory")
}
