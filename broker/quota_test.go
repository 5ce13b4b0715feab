package broker_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/segment"

	"github.com/felixmq/felix/internal/testutil"
)

// logBytes is the size of every file under dir: what durable logs hold.
func logBytes(t *testing.T, dir string) int64 {
	var n int64
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil && strings.HasSuffix(p, ".log") {
			n += fi.Size()
		}
		return err
	}))
	return n
}

func tenantStream(tenant, name string, shards int) broker.StreamSpec {
	return broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: tenant, Namespace: "default", Stream: name},
		Shards: shards, Durable: true, Fsync: "on_commit"}
}

// TestDurableStreamPreallocatesWhatItNeeds: a 16-shard durable stream
// preallocated 16 x 256 MiB (4 GiB) at creation; now each shard
// preallocates its first step and grows as records need it.
func TestDurableStreamPreallocatesWhatItNeeds(t *testing.T) {
	dir := t.TempDir()
	h := serveBroker(t, broker.Config{DataDir: dir}, tenantStream("t1", "wide", 16))
	require.LessOrEqual(t, logBytes(t, dir), int64(16*segment.DefaultInitialAllocBytes), "created")
	ctx := ctxT(t, 20*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "wide")
	require.NoError(t, err)
	for i := range 64 {
		require.NoError(t, pub.PublishShardAsync(uint32(i%16), [][]byte{make([]byte, 64<<10)}).Wait(ctx))
	}
	require.LessOrEqual(t, logBytes(t, dir), int64(16*segment.DefaultInitialAllocBytes), "4 x 64 KiB per shard")
}

// publishUntilRefused publishes 32 KiB records to pub until one is
// refused, and returns the refusal.
func publishUntilRefused(ctx context.Context, t *testing.T, pub *client.Publisher) error {
	for range 1000 {
		if err := pub.Publish(ctx, make([]byte, 32<<10)); err != nil {
			return err
		}
	}
	t.Fatal("never refused")
	return nil
}

// TestTenantQuotaBoundsDurableBytes: a tenant's durable logs stop growing
// at FELIX_TENANT_DURABLE_BYTES (its publishes refused with tenant_quota,
// not acked, the log still usable), another tenant's publishes are not
// affected, and deleting the stream gives the quota back at once.
func TestTenantQuotaBoundsDurableBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := broker.Config{DataDir: dir, TenantDurableBytes: 1 << 20,
		Storage: segment.Config{SegmentBytes: 256 << 10, InitialAllocBytes: 64 << 10}}
	h := serveBroker(t, cfg, tenantStream("t1", "hog", 2), tenantStream("t2", "other", 1))
	ctx := ctxT(t, 30*time.Second)
	hog, err := h.dial(t).NewPublisher(ctx, "default", "hog")
	require.NoError(t, err)
	err = publishUntilRefused(ctx, t, hog)
	require.ErrorContains(t, err, "tenant_quota")
	require.LessOrEqual(t, logBytes(t, dir), int64(1<<20)+64<<10, "t1's bytes, and t2's first step")

	other, err := h.dialWith(t, client.Config{Tenant: "t2", Token: "dev"}).NewPublisher(ctx, "default", "other")
	require.NoError(t, err)
	for range 20 {
		require.NoError(t, other.Publish(ctx, make([]byte, 32<<10)), "another tenant is not held by t1's quota")
	}

	require.NoError(t, h.b.DeleteStream(broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "hog"}))
	require.NoError(t, h.b.CreateStream(tenantStream("t1", "again", 1)))
	again, err := h.dial(t).NewPublisher(ctx, "default", "again")
	require.NoError(t, err)
	for range 20 {
		require.NoError(t, again.Publish(ctx, make([]byte, 32<<10)), "the deleted stream's quota is back")
	}
}

// TestFailedDurableCreationLeavesNothing: a creation that fails part-way
// (here the quota runs out at the fifth of eight shards) removes the
// shard directories it made and gives back what they held; the same
// stream can be created once there is room.
func TestFailedDurableCreationLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	h := serveBroker(t, broker.Config{DataDir: dir, TenantDurableBytes: 300 << 10,
		Storage: segment.Config{InitialAllocBytes: 64 << 10}})
	err := h.b.CreateStream(tenantStream("t1", "wide", 8))
	require.ErrorIs(t, err, segment.ErrNoSpace)
	require.ErrorIs(t, err, broker.ErrTenantQuota)
	left, rerr := os.ReadDir(dir)
	require.NoError(t, rerr)
	for _, e := range left {
		require.False(t, e.IsDir(), "left behind: %s", e.Name())
	}
	require.Empty(t, h.b.Streams())
	require.NoError(t, h.b.CreateStream(tenantStream("t1", "wide", 4)), "what the failed creation held is back")
}

// TestPreallocationKeepsTheDiskReserve: a preallocation that would leave
// less than FELIX_DATA_MIN_FREE_BYTES free is refused.
func TestPreallocationKeepsTheDiskReserve(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir(), DataMinFreeBytes: 1 << 62})
	err := h.b.CreateStream(tenantStream("t1", "s", 1))
	require.ErrorIs(t, err, broker.ErrDiskReserve)
}

// TestDeleteStreamAppliesAtOnce: deleting a durable stream ends its
// subscriptions, refuses its publishes and removes its files, without a
// restart; a stream of the same name starts afresh.
func TestDeleteStreamAppliesAtOnce(t *testing.T) {
	dir := t.TempDir()
	h := serveBroker(t, broker.Config{DataDir: dir}, tenantStream("t1", "gone", 2))
	ctx := ctxT(t, 20*time.Second)
	c := h.dial(t)
	pub, err := c.NewPublisher(ctx, "default", "gone")
	require.NoError(t, err)
	require.NoError(t, pub.PublishShardAsync(1, [][]byte{[]byte("x")}).Wait(ctx))
	sub, err := c.Subscribe(ctx, "default", "gone", client.SubscribeOptions{Shard: 1, From: client.Earliest()})
	require.NoError(t, err)
	_, err = sub.Next(ctx)
	require.NoError(t, err)

	require.NoError(t, h.b.DeleteStream(broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "gone"}))
	_, err = sub.Next(ctx)
	require.Error(t, err, "the subscription ended")
	require.False(t, errors.Is(err, context.DeadlineExceeded))
	require.ErrorContains(t, pub.Publish(ctx, []byte("y")), "stream not found")
	require.Zero(t, logBytes(t, dir), "the shard logs are gone")
	require.NoError(t, h.b.Close())
	h2 := serveBroker(t, broker.Config{DataDir: dir})
	require.Empty(t, h2.b.Streams(), "and so is its catalog entry")
}

// TestMissingShardDirectoryIsRefused: a shard directory removed while the
// catalog lists its stream was recreated empty at offset 0, reusing the
// offsets of acknowledged records that were gone, without a warning. Now
// the broker refuses to open (New fails naming the directory and the way
// out) and creates nothing; with the stream in ResetMissing it starts that
// shard empty, saying so.
func TestMissingShardDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	spec := tenantStream("t1", "jobs", 2)
	h := serveBroker(t, broker.Config{DataDir: dir}, spec)
	ctx := ctxT(t, 20*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "jobs")
	require.NoError(t, err)
	for shard := range 2 {
		require.NoError(t, pub.PublishShardAsync(uint32(shard), [][]byte{[]byte("acked")}).Wait(ctx))
	}
	require.NoError(t, h.b.Close())
	gone := filepath.Join(dir, segment.ShardDirName("t1", "default", "jobs", 1))
	require.NoError(t, os.RemoveAll(gone))

	_, err = broker.New(broker.Config{DataDir: dir, TLS: h0TLS(t), ListenAddrs: []string{"127.0.0.1:0"}})
	require.ErrorIs(t, err, segment.ErrMissing)
	require.ErrorContains(t, err, "FELIX_DURABLE_RESET_MISSING=t1/default/jobs")
	require.NoDirExists(t, gone, "nothing recreated")

	var logs testutil.LockedBuffer
	h2 := serveBroker(t, broker.Config{DataDir: dir, ResetMissing: []broker.StreamKey{spec.StreamKey},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.Contains(t, logs.String(), "durable shard directory missing: starting it empty at offset 0")
	sub, err := h2.dial(t).Subscribe(ctx, "default", "jobs", client.SubscribeOptions{From: client.Earliest()})
	require.NoError(t, err)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "acked", string(ev.Payload), "shard 0 kept its record")
}
