package broker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

func TestAdminCachesAPI(t *testing.T) {
	dir := t.TempDir()
	h := startBroker(t, broker.Config{DataDir: dir})
	srv := httptest.NewServer(h.b.AdminHandler())
	defer srv.Close()

	code, body := do(t, srv, "POST", "/v1/caches", `{"tenant":"t1","namespace":"default","cache":"sessions","durable":true,"fsync":"on_commit","max_entries":10}`)
	require.Equal(t, http.StatusCreated, code, body)
	var got broker.CacheSpec
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Equal(t, 10, got.MaxEntries)
	require.Equal(t, int64(broker.DefaultCacheMaxBytes), got.MaxBytes, "defaults filled in")
	code, body = do(t, srv, "POST", "/v1/caches", `{"tenant":"t1","namespace":"default","cache":"sessions"}`)
	require.Equal(t, http.StatusConflict, code, body)
	for _, bad := range []string{`{"tenant":"t1","namespace":"default","cache":""}`, `{"tenant":"t1","namespace":"default","cache":"x","fsync":"never"}`,
		`{"tenant":"t1","namespace":"default","cache":"x","durable":true,"fsync":"sometimes"}`, `{"tenant":"t1","namespace":"default","cache":"x","max_bytes":-1}`,
		`not json`, `{"tenant":"t1","namespace":"d","cache":"x","ttl":2}`} {
		code, body = do(t, srv, "POST", "/v1/caches", bad)
		require.Equal(t, http.StatusBadRequest, code, "%s -> %s", bad, body)
		require.Contains(t, body, `"error"`)
	}
	code, body = do(t, srv, "POST", "/v1/caches", `{"tenant":"t1","namespace":"default","cache":"tmp"}`)
	require.Equal(t, http.StatusCreated, code, body)
	code, body = do(t, srv, "GET", "/v1/caches", "")
	require.Equal(t, http.StatusOK, code)
	var list struct{ Caches []broker.CacheSpec }
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list.Caches, 2)

	ctx := ctxT(t, 10*time.Second)
	require.NoError(t, openCache(t, h, "sessions").Put(ctx, "k", []byte("v"), 0), "usable at once")
	st := h.b.Stats()
	require.Len(t, st.Caches, 2)
	require.Equal(t, 1, st.Caches[0].Entries)
	require.NotNil(t, st.Caches[0].Commit, "a durable cache reports its group commit")
	require.NoError(t, h.b.Close())
	h2 := startBroker(t, broker.Config{DataDir: dir})
	require.Len(t, h2.b.Caches(), 1, "only the durable cache is in the catalog")
}
