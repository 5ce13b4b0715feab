package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/controlplane/api"
)

func etcdStore(t testing.TB, prefix string) *EtcdStore {
	es, err := NewEtcdStore(EtcdConfig{Client: etcdClient(t), Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { es.Close() })
	return es
}

// Two control planes on one etcd serve the same data, and a broker
// long-polling through A learns of a stream created through B within 1s.
func TestEtcdTwoInstancesSeeEachOther(t *testing.T) {
	prefix := etcdPrefix()
	a := newBootstrapInstance(t, etcdStore(t, prefix))
	b := newBootstrapInstance(t, etcdStore(t, prefix))
	a.seed(t)
	b.mustDo(t, http.StatusOK, "GET", "/v1/tenants/t1/namespaces/ns", "")
	b.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"from-b","shards":2}`)
	a.mustDo(t, http.StatusOK, "GET", streamsURL+"/from-b", "")

	cursor := a.follow(t)
	got := make(chan reply, 1)
	go func() { got <- a.do(t, "GET", fmt.Sprintf("/v1/changes?cursor=%d&wait=20s", cursor), "") }()
	select {
	case r := <-got:
		t.Fatalf("long-poll through A answered before any change: %s", r.body)
	case <-time.After(300 * time.Millisecond):
	}
	b.mustDo(t, http.StatusCreated, "POST", streamsURL, `{"stream":"watched"}`)
	created := time.Now()
	select {
	case r := <-got:
		latency := time.Since(created)
		t.Logf("watcher on A learned of a stream created on B after %v", latency)
		require.Less(t, latency, time.Second)
		require.Equal(t, http.StatusOK, r.status, r.body)
		var p api.ChangesPage
		r.decode(t, &p)
		require.Len(t, p.Changes, 1)
		require.Equal(t, Ref{Kind: KindStream, Path: "t1/ns/watched"}, p.Changes[0].Ref)
	case <-time.After(5 * time.Second):
		t.Fatal("watcher on A did not learn of B's stream within 5s")
	}
}

// Two control planes racing to create one name: exactly one wins, the
// other gets already_exists (the etcd transaction decides, not a read
// before the write).
func TestEtcdCreateRaceHasOneWinner(t *testing.T) {
	prefix := etcdPrefix()
	a := newBootstrapInstance(t, etcdStore(t, prefix))
	b := newBootstrapInstance(t, etcdStore(t, prefix))
	a.seed(t)
	for i := range 5 {
		body := fmt.Sprintf(`{"stream":"race%d"}`, i)
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for j, in := range []*instance{a, b} {
			wg.Go(func() {
				resp, err := rawPost(in.url+streamsURL, body)
				if err == nil {
					statuses[j] = resp.StatusCode
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		require.ElementsMatch(t, []int{http.StatusCreated, http.StatusConflict}, statuses)
	}
}

// A cursor before etcd's compaction point answers resync; the first
// retained cursor works; a cursor ahead of etcd resyncs.
func TestEtcdResyncAfterCompaction(t *testing.T) {
	prefix := etcdPrefix()
	es := etcdStore(t, prefix)
	in := newBootstrapInstance(t, es)
	in.seed(t)
	var revs []int64
	for i := range 4 {
		var s api.Stream
		in.mustDo(t, 201, "POST", streamsURL, fmt.Sprintf(`{"stream":"c%d"}`, i)).decode(t, &s)
		revs = append(revs, s.Revision)
	}
	_, err := es.cli.Compact(context.Background(), revs[2])
	require.NoError(t, err)

	r := in.mustDo(t, http.StatusGone, "GET", fmt.Sprintf("/v1/changes?cursor=%d", revs[0]), "")
	var e api.ErrorBody
	r.decode(t, &e)
	require.Equal(t, "resync", e.Code)
	require.GreaterOrEqual(t, e.Revision, revs[3])
	require.Contains(t, e.Message, fmt.Sprintf("changes after revision %d are kept", revs[2]-1))

	p := in.changes(t, fmt.Sprintf("cursor=%d", revs[2]-1))
	require.Equal(t, revs[2:], revisions(p.Changes))

	in.mustDo(t, http.StatusGone, "GET", "/v1/changes?cursor=999999999", "")
}

// With etcd down, requests answer 503 unavailable within the store's
// timeout instead of hanging.
func TestEtcdUnreachableIs503(t *testing.T) {
	es, err := NewEtcdStore(EtcdConfig{Endpoints: []string{freePort(t)}, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	defer es.Close()
	in := newBootstrapInstance(t, es)
	r := in.mustDo(t, http.StatusServiceUnavailable, "GET", "/v1/tenants", "")
	require.Contains(t, r.body, `"code": "unavailable"`)
	require.Equal(t, "1", r.header.Get("Retry-After"))
}

// A tail smaller than the backlog: readers behind its base fall back to a
// watch from their cursor, readers within it are served from memory, and
// the pages still join without a gap.
func TestEtcdTailTrimmedStillNeverSkips(t *testing.T) {
	es, err := NewEtcdStore(EtcdConfig{Client: etcdClient(t), Prefix: etcdPrefix(), TailSize: 3})
	require.NoError(t, err)
	t.Cleanup(func() { es.Close() })
	in := newBootstrapInstance(t, es)
	in.seed(t)
	start := in.follow(t) // starts the tail here
	var want []int64
	for i := range 10 {
		var s api.Stream
		in.mustDo(t, 201, "POST", streamsURL, fmt.Sprintf(`{"stream":"s%d"}`, i)).decode(t, &s)
		want = append(want, s.Revision)
	}
	var got []int64
	for cursor := start; ; {
		p := in.changes(t, fmt.Sprintf("cursor=%d&limit=2", cursor))
		got = append(got, revisions(p.Changes)...)
		cursor = p.NextCursor
		if !p.Truncated {
			break
		}
	}
	require.Equal(t, want, got)
}

// A broker's start (snapshot, then the feed from its revision) is served
// from the tail, not from a watch into the past: the snapshot starts it.
func TestEtcdSnapshotStartsTail(t *testing.T) {
	es := etcdStore(t, etcdPrefix())
	in := newBootstrapInstance(t, es)
	in.seed(t)
	var snap api.Snapshot
	in.mustDo(t, http.StatusOK, "GET", "/v1/snapshot", "").decode(t, &snap)
	for i := range 3 {
		in.mustDo(t, http.StatusCreated, "POST", streamsURL, fmt.Sprintf(`{"stream":"s%d"}`, i))
	}
	head, err := es.position(context.Background(), snap.Revision)
	require.NoError(t, err)
	p, ok := es.tail.read(context.Background(), snap.Revision, head, 10)
	require.True(t, ok, "the tail serves the feed from the snapshot's revision")
	require.Len(t, p.Changes, 3)
}
