package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
)

// feedCatalog is a control plane as the broker sees it: what it creates
// reaches the broker later, through its feed (here: a goroutine).
type feedCatalog struct {
	b     func() *broker.Broker
	calls atomic.Int32
	err   atomic.Pointer[error]
}

func (c *feedCatalog) CreateStream(_ context.Context, s broker.StreamSpec) error {
	c.calls.Add(1)
	if err := c.err.Load(); err != nil {
		return *err
	}
	go c.b().CreateStream(s) // the feed, after the answer
	return nil
}

func (c *feedCatalog) CreateCache(_ context.Context, s broker.CacheSpec) error {
	c.calls.Add(1)
	return nil
}

// With a catalog (the control plane it follows), the broker's POST
// /v1/streams creates the stream there and answers once the broker serves
// it, so that a publish right after works and the catalog lists it; a
// catalog elsewhere is pointed at with 409; a durable stream this broker
// cannot keep is refused with the reason before the catalog is asked.
func TestAdminCreateGoesThroughTheCatalog(t *testing.T) {
	cat := &feedCatalog{}
	h := startBroker(t, broker.Config{Catalog: cat})
	cat.b = func() *broker.Broker { return h.b }
	srv := httptest.NewServer(h.b.AdminHandler())
	defer srv.Close()

	code, body := do(t, srv, "POST", "/v1/streams", `{"tenant":"t1","namespace":"default","stream":"orders","shards":2}`)
	require.Equal(t, http.StatusCreated, code, body)
	ctx := ctxT(t, 10*time.Second)
	p, err := h.dial(t).NewPublisher(ctx, "default", "orders")
	require.NoError(t, err)
	require.NoError(t, p.Publish(ctx, []byte("x")), "served when the create is answered")

	code, body = do(t, srv, "POST", "/v1/streams", `{"tenant":"t1","namespace":"default","stream":"jobs","durable":true,"fsync":"on_commit"}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "FELIX_DATA_DIR")
	require.Equal(t, int32(1), cat.calls.Load(), "refused before the catalog was asked")

	elsewhere := errors.Join(broker.ErrCatalogElsewhere, errors.New("create it at http://cp:7070"))
	cat.err.Store(&elsewhere)
	code, body = do(t, srv, "POST", "/v1/streams", `{"tenant":"t1","namespace":"default","stream":"other"}`)
	require.Equal(t, http.StatusConflict, code, body)
	require.Contains(t, body, "http://cp:7070")
	code, body = do(t, srv, "DELETE", "/v1/streams/t1/default/orders", "")
	require.Equal(t, http.StatusConflict, code, "a catalog deletes: %s", body)
}

// GET /v1/streams/{tenant}/{namespace}/{stream} describes one stream: its
// spec, its shards' offsets (a durable shard's from its log) and
// subscribers, and its consumer groups with their lag.
func TestAdminStreamInfo(t *testing.T) {
	h := serveBroker(t, broker.Config{DataDir: t.TempDir()}, durableSpec("jobs", "never"))
	srv := httptest.NewServer(h.b.AdminHandler())
	defer srv.Close()
	ctx := ctxT(t, 10*time.Second)
	c := h.dial(t)
	p, err := c.NewPublisher(ctx, "default", "jobs")
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, p.Publish(ctx, []byte("job")))
	}
	_, err = c.Subscribe(ctx, "default", "jobs", client.SubscribeOptions{})
	require.NoError(t, err)
	q, err := c.Consume(ctx, "default", "jobs", "workers", client.QueueOptions{})
	require.NoError(t, err)
	m, err := q.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, q.Ack(ctx, m.Ref()))

	code, body := do(t, srv, "GET", "/v1/streams/t1/default/jobs", "")
	require.Equal(t, http.StatusOK, code, body)
	var info broker.StreamInfo
	require.NoError(t, json.Unmarshal([]byte(body), &info))
	require.True(t, info.Durable)
	require.Len(t, info.Shards, 1)
	require.Equal(t, uint64(3), info.Shards[0].NextOffset)
	require.Equal(t, 1, info.Shards[0].Subscribers)
	require.Len(t, info.Groups, 1)
	require.Equal(t, "workers", info.Groups[0].Group)
	require.Equal(t, uint64(2), info.Groups[0].Lag)

	code, _ = do(t, srv, "GET", "/v1/streams/t1/default/nope", "")
	require.Equal(t, http.StatusNotFound, code)

	// Without a catalog the broker is the registry: it deletes too.
	code, body = do(t, srv, "DELETE", "/v1/streams/t1/default/jobs", "")
	require.Equal(t, http.StatusNoContent, code, body)
	code, _ = do(t, srv, "GET", "/v1/streams/t1/default/jobs", "")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = do(t, srv, "DELETE", "/v1/streams/t1/default/jobs", "")
	require.Equal(t, http.StatusNotFound, code)
}
