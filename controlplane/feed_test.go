package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/controlplane/api"
)

// The feed never skips: paging with a small limit from a snapshot's
// revision returns every change exactly once, in order, each truncated
// page saying so.
func TestFeedPagesNeverSkip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newBootstrapInstance(t, open(t))
		in.seed(t)
		var snap api.Snapshot
		in.mustDo(t, 200, "GET", "/v1/snapshot", "").decode(t, &snap)
		require.Len(t, snap.Tenants, 1)
		require.Len(t, snap.Namespaces, 1)
		var want []int64
		for i := range 10 {
			var s api.Stream
			in.mustDo(t, 201, "POST", streamsURL, fmt.Sprintf(`{"stream":"s%d"}`, i)).decode(t, &s)
			want = append(want, s.Revision)
		}
		var d api.Deleted
		in.mustDo(t, 200, "DELETE", streamsURL+"/s3", "").decode(t, &d)
		want = append(want, d.Revision)

		var got []Change
		cursor := snap.Revision
		for {
			p := in.changes(t, fmt.Sprintf("cursor=%d&limit=3", cursor))
			got = append(got, p.Changes...)
			if !p.Truncated {
				require.LessOrEqual(t, len(p.Changes), 3)
				if len(p.Changes) > 0 {
					require.Equal(t, p.Changes[len(p.Changes)-1].Revision, p.NextCursor)
				}
				break
			}
			require.Len(t, p.Changes, 3, "a truncated page is full")
			require.Equal(t, p.Changes[2].Revision, p.NextCursor, "next_cursor is the last revision returned")
			cursor = p.NextCursor
		}
		require.Equal(t, want, revisions(got))
		require.Equal(t, OpDeleted, got[len(got)-1].Op)
		require.Equal(t, Ref{Kind: KindStream, Path: "t1/ns/s3"}, got[len(got)-1].Ref)
		require.JSONEq(t, `{"tenant":"t1","namespace":"ns","stream":"s0","shards":1,"durable":false}`, string(got[0].Object))

		// Caught up: an empty page keeps the cursor.
		p := in.changes(t, fmt.Sprintf("cursor=%d", want[len(want)-1]))
		require.Empty(t, p.Changes)
		require.False(t, p.Truncated)
		require.Equal(t, want[len(want)-1], p.NextCursor)
	})
}

func revisions(cs []Change) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Revision
	}
	return out
}

// post creates a resource from any goroutine and returns its revision.
func post(url, body string) (int64, error) {
	resp, err := rawPost(url, body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var v struct{ Revision int64 }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("POST %s %s: status %d, %v", url, body, resp.StatusCode, err)
	}
	return v.Revision, nil
}

// Many goroutines create streams while a reader pages the feed with a small
// limit: the reader sees every revision exactly once, in order.
func TestFeedNeverSkipsUnderConcurrentWriters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newInstance(t, open(t), AuthorizerFunc(func(*http.Request, string, string) error { return nil }))
		in.seed(t)
		var snap api.Snapshot
		in.mustDo(t, 200, "GET", "/v1/snapshot", "").decode(t, &snap)
		const writers, each = 8, 25
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created []int64
			errs    []error
		)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					rev, err := post(in.url+streamsURL, fmt.Sprintf(`{"stream":"w%d-%d"}`, w, i))
					mu.Lock()
					created, errs = append(created, rev), append(errs, err)
					mu.Unlock()
				}
			})
		}
		var seen []Change
		cursor := snap.Revision
		deadline := time.Now().Add(30 * time.Second)
		for len(seen) < writers*each && time.Now().Before(deadline) {
			p := in.changes(t, fmt.Sprintf("cursor=%d&limit=7&wait=5s", cursor))
			require.LessOrEqual(t, len(p.Changes), 7)
			seen = append(seen, p.Changes...)
			cursor = p.NextCursor
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		require.Empty(t, in.changes(t, fmt.Sprintf("cursor=%d", cursor)).Changes, "nothing after the last change")
		got := revisions(seen)
		require.True(t, slices.IsSorted(got), "revisions in order")
		require.Len(t, slices.Compact(slices.Clone(got)), len(got), "no revision twice")
		slices.Sort(created)
		require.Equal(t, created, got, "every created revision seen exactly once")
	})
}

// A long-poll returns as soon as a change exists, well within a second.
func TestLongPollReturnsOnChange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(testing.TB) Store) {
		in := newBootstrapInstance(t, open(t))
		in.seed(t)
		cursor := in.follow(t)
		got := make(chan api.ChangesPage, 1)
		go func() {
			var p api.ChangesPage
			r := in.do(t, "GET", fmt.Sprintf("/v1/changes?cursor=%d&wait=20s", cursor), "")
			_ = json.Unmarshal([]byte(r.body), &p)
			got <- p
		}()
		select {
		case p := <-got:
			t.Fatalf("long-poll answered before any change: %+v", p)
		case <-time.After(200 * time.Millisecond):
		}
		in.mustDo(t, 201, "POST", streamsURL, `{"stream":"late"}`)
		created := time.Now()
		select {
		case p := <-got:
			latency := time.Since(created)
			t.Logf("long-poll learned of the stream %v after its creation returned", latency)
			require.Less(t, latency, time.Second)
			require.Len(t, p.Changes, 1)
			require.Equal(t, "t1/ns/late", p.Changes[0].Path)
		case <-time.After(5 * time.Second):
			t.Fatal("long-poll did not return within 5s of a change")
		}
	})
}

// A long-poll with nothing to report answers an empty page at its timeout,
// and Server.Close ends pending long-polls at once.
func TestLongPollTimeoutAndClose(t *testing.T) {
	in := newBootstrapInstance(t, nil)
	start := time.Now()
	p := in.changes(t, "cursor=0&wait=300ms")
	require.Empty(t, p.Changes)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	done := make(chan reply, 1)
	go func() { done <- in.do(t, "GET", "/v1/changes?cursor=0&wait=30s", "") }()
	select {
	case r := <-done:
		t.Fatalf("long-poll answered early: %s", r.body)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, in.srv.Close())
	select {
	case r := <-done:
		require.Equal(t, http.StatusOK, r.status, r.body)
		require.Contains(t, r.body, `"changes": []`)
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end the long-poll")
	}
}

// A cursor older than the retained history answers 410 resync with the
// current revision; the oldest retained cursor still works; a cursor ahead
// of the store (a restarted memory store) resyncs too. The tenant's
// creation also stores its signing keys (revision 2, hidden from the feed),
// so the namespaces are revisions 3 to 11.
func TestResyncOnCursorOlderThanHistory(t *testing.T) {
	ms, err := NewMemoryStore(MemoryConfig{History: 5})
	require.NoError(t, err)
	in := newBootstrapInstance(t, ms)
	in.mustDo(t, 201, "POST", "/v1/tenants", `{"tenant":"t1"}`)
	for i := range 9 {
		in.mustDo(t, 201, "POST", nsURL, fmt.Sprintf(`{"namespace":"n%d"}`, i))
	}
	for _, cursor := range []int{0, 5} {
		r := in.mustDo(t, http.StatusGone, "GET", fmt.Sprintf("/v1/changes?cursor=%d", cursor), "")
		var e api.ErrorBody
		r.decode(t, &e)
		require.Equal(t, "resync", e.Code)
		require.Equal(t, int64(11), e.Revision)
		require.Contains(t, e.Message, fmt.Sprintf("cursor %d is older than the retained history (changes after revision 6 are kept)", cursor))
	}
	p := in.changes(t, "cursor=6")
	require.Equal(t, []int64{7, 8, 9, 10, 11}, revisions(p.Changes))

	r := in.mustDo(t, http.StatusGone, "GET", "/v1/changes?cursor=12&wait=1s", "")
	require.Contains(t, r.body, "ahead of the store")

	// The long-poll path resyncs too, rather than waiting out its time.
	start := time.Now()
	in.mustDo(t, http.StatusGone, "GET", "/v1/changes?cursor=2&wait=10s", "")
	require.Less(t, time.Since(start), 5*time.Second)
}
