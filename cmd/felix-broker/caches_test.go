package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With no configuration the broker creates cache t1/default/demo
// (FELIX_CACHES), next to stream t1/default/demo.
func TestDefaultBrokerServesDemoCache(t *testing.T) {
	bp := startBrokerProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	k, err := bp.dial(t).OpenCache(ctx, "default", "demo")
	require.NoError(t, err)
	require.NoError(t, k.Put(ctx, "hello", []byte("world"), 0))
	v, found, err := k.Get(ctx, "hello")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "world", string(v))
}
