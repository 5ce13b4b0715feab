package broker_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/wire"
)

// docs/design.md, "Semantics", errors: every refused cache request gets a typed code and a
// precise message, correlated by its request id, and the stream and the
// connection go on serving.
func TestCacheBadRequestsGetPreciseErrors(t *testing.T) {
	h := startCacheBroker(t, broker.Config{}, cacheSpec("c"))
	ctx := ctxT(t, 10*time.Second)
	c := h.dial(t)
	k, err := c.OpenCache(ctx, "default", "c")
	require.NoError(t, err)
	missing, err := c.OpenCache(ctx, "default", "nope")
	require.NoError(t, err)

	err = missing.Put(ctx, "k", []byte("v"), 0)
	requireCacheError(t, err, wire.CacheErrNotFound)
	require.ErrorContains(t, err, "cache not found: t1/default/nope")
	_, _, err = missing.Get(ctx, "k")
	requireCacheError(t, err, wire.CacheErrNotFound)

	err = k.Put(ctx, "k", make([]byte, broker.MaxCacheValueBytes+1), 0)
	requireCacheError(t, err, wire.CacheErrValueTooLarge)
	require.ErrorContains(t, err, "value of 1048577 bytes")
	err = k.Put(ctx, "", []byte("v"), 0)
	requireCacheError(t, err, wire.CacheErrInvalid)
	require.ErrorContains(t, err, "key must be 1 to 1024 bytes, got 0")
	_, err = k.CounterAdd(ctx, strings.Repeat("x", 1025), 1)
	requireCacheError(t, err, wire.CacheErrInvalid)

	// The same stream and connection still work.
	require.NoError(t, k.Put(ctx, "k", []byte("v"), 0))
	v, found, err := k.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v", string(v))
}

// Raw frames a client library would not send: missing fields, a zero TTL,
// a fractional delta, another tenant. Each gets an error reply and the
// stream goes on (a tenant mismatch, being forbidden, ends it). A frame that
// does not decode cannot be correlated, so it gets the v1 error message.
func TestCacheMalformedFramesOnARawStream(t *testing.T) {
	h := startCacheBroker(t, broker.Config{}, cacheSpec("c"))
	ctx := ctxT(t, 10*time.Second)
	qc := h.rawConn(t)
	str, err := qc.OpenStreamSync(ctx)
	require.NoError(t, err)
	flags, caps := wire.KnownCapabilities.FrameFlags(), wire.KnownCapabilities.Caps()
	str.Write(wire.AppendJSONFrame(nil, &wire.Auth{TenantID: "t1", Token: "dev", ClientFlags: &flags, ClientCaps: &caps}))
	var frames []byte
	for _, js := range []string{
		`{"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"c","value":"dg==","request_id":1,"ttl_ms":null}`,
		`{"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":"dg==","request_id":2,"ttl_ms":0}`,
		`{"type":"counter_add","tenant_id":"t1","namespace":"default","cache":"c","key":"k","delta":1.5,"request_id":3}`,
		`{"type":"cache_delete","tenant_id":"t1","namespace":"default","key":"k","request_id":4}`,
		`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k","request_id":5}`,
		`{"type":"cache_get","tenant_id":"t2","namespace":"default","cache":"c","key":"k","request_id":6}`,
	} {
		frames = append(frames, wire.AppendHeader(nil, 0, uint32(len(js)))...)
		frames = append(frames, js...)
	}
	str.Write(frames)
	str.Close()
	reply, err := io.ReadAll(str)
	require.NoError(t, err)
	var got []string
	for len(reply) > 0 {
		_, payload, rest, err := wire.SplitFrame(reply, 0)
		require.NoError(t, err)
		got = append(got, string(payload))
		reply = rest
	}
	require.Equal(t, []string{
		fmt.Sprintf(`{"type":"auth_ok","server_flags":%d,"server_caps":%d}`, broker.ServerFlags.FrameFlags(), broker.ServerFlags.Caps()),
		`{"type":"error","message":"malformed message: wire: cache_put: missing field \"key\""}`,
		`{"type":"cache_error","request_id":2,"code":"invalid_request","message":"ttl_ms 0 not in [1, 3153600000000] (null = no expiry)"}`,
		`{"type":"error","message":"malformed message: wire: malformed JSON field \"delta\": json: cannot unmarshal number 1.5 into Go value of type int64"}`,
		`{"type":"error","message":"malformed message: wire: cache_delete: missing field \"cache\""}`,
		`{"type":"cache_value","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":null,"request_id":5}`,
		`{"type":"cache_error","request_id":6,"code":"forbidden","message":"forbidden: tenant mismatch"}`,
	}, got)
}

// The published broker's one-shot mode: cache_put or cache_get without a
// request_id is answered (ok, cache_value) and the stream ends.
func TestCacheOneShotWithoutRequestID(t *testing.T) {
	h := startCacheBroker(t, broker.Config{}, cacheSpec("c"))
	ctx := ctxT(t, 10*time.Second)
	qc := h.rawConn(t)
	for _, tc := range []struct{ req, want string }{
		{`{"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":"dg==","ttl_ms":null}`, `{"type":"ok"}`},
		{`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"c","key":"k"}`,
			`{"type":"cache_value","tenant_id":"t1","namespace":"default","cache":"c","key":"k","value":"dg=="}`},
		{`{"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"zz","key":"k"}`,
			`{"type":"error","message":"cache not found: t1/default/zz"}`},
	} {
		str, err := qc.OpenStreamSync(ctx)
		require.NoError(t, err)
		req := append(bytes.Clone(authFrame), wire.AppendHeader(nil, 0, uint32(len(tc.req)))...)
		req = append(req, tc.req...)
		str.Write(req) // not finished: the broker ends the stream itself
		reply, err := io.ReadAll(str)
		require.NoError(t, err, "the broker finished its side")
		_, payload, rest, err := wire.SplitFrame(reply, 0)
		require.NoError(t, err)
		require.Equal(t, `{"type":"ok"}`, string(payload), "auth reply")
		_, payload, rest, err = wire.SplitFrame(rest, 0)
		require.NoError(t, err)
		require.Equal(t, tc.want, string(payload))
		require.Empty(t, rest)
		str.CancelWrite(0)
	}
}
