package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

func TestParseStreamList(t *testing.T) {
	specs, err := parseStreamList(" t1/default/demo:1, t1/ns/orders:4:on_commit,t2/a/b ")
	require.NoError(t, err)
	require.Equal(t, []broker.StreamSpec{
		{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "demo"}, Shards: 1},
		{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "ns", Stream: "orders"}, Shards: 4, Durable: true, Fsync: "on_commit"},
		{StreamKey: broker.StreamKey{Tenant: "t2", Namespace: "a", Stream: "b"}, Shards: 1},
	}, specs)
	for _, bad := range []string{"t1/demo", "t1/a/b:0", "t1/a/b:x", "t1/a/b:2:sometimes"} {
		_, err := parseStreamList(bad)
		require.Error(t, err, bad)
	}
	empty, err := parseStreamList("")
	require.NoError(t, err)
	require.Empty(t, empty)
}

func TestParseCacheList(t *testing.T) {
	specs, err := parseCacheList(" t1/default/demo, t1/ns/sessions:on_commit ")
	require.NoError(t, err)
	require.Equal(t, []broker.CacheSpec{
		{CacheKey: broker.CacheKey{Tenant: "t1", Namespace: "default", Cache: "demo"}},
		{CacheKey: broker.CacheKey{Tenant: "t1", Namespace: "ns", Cache: "sessions"}, Durable: true, Fsync: "on_commit"},
	}, specs)
	for _, bad := range []string{"t1/demo", "t1/a/b:sometimes", "t1/a/b/c"} {
		_, err := parseCacheList(bad)
		require.Error(t, err, bad)
	}
}

// TestEmptyStreamsMeansNone: FELIX_STREAMS= set but empty could not turn
// the demo stream off although the knob says "or empty"; now it creates no
// stream, and FELIX_CACHES= no cache, with or without the embedded control
// plane.
func TestEmptyStreamsMeansNone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs broker processes")
	}
	for _, cp := range []string{"off", "127.0.0.1:0"} {
		t.Run("embedded control plane "+cp, func(t *testing.T) {
			bp := startBrokerProcess(t, "FELIX_STREAMS=", "FELIX_CACHES=", "FELIX_EMBEDDED_CONTROLPLANE_BIND="+cp)
			var streams, caches map[string][]any
			getJSON(t, "http://"+bp.admin+"/v1/streams", &streams)
			getJSON(t, "http://"+bp.admin+"/v1/caches", &caches)
			require.Empty(t, streams["streams"])
			require.Empty(t, caches["caches"])
		})
	}
}
