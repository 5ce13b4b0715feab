package auth

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newTestFetcher(t testing.TB, clk *testClock) *Fetcher {
	f, err := NewFetcher(FetcherConfig{Now: clk.Now, Timeout: 5 * time.Second})
	require.NoError(t, err)
	return f
}

func TestFetcherCachesKeys(t *testing.T) {
	srv := newIdPServer(t, jwksJSON(jwkJSON(t, &testRSA(t, 0).PublicKey, "k1", "")))
	clk := newClock()
	f := newTestFetcher(t, clk)
	for range 5 {
		k, err := f.Key(context.Background(), srv.URL, "k1")
		require.NoError(t, err)
		require.Equal(t, "k1", k.ID)
		require.Empty(t, k.Algorithm, "no alg in the JWKS, none invented")
	}
	require.EqualValues(t, 1, srv.fetches.Load())
}

func TestFetcherUnknownKidRefreshIsRateLimited(t *testing.T) {
	srv := newIdPServer(t, jwksJSON(jwkJSON(t, &testRSA(t, 0).PublicKey, "k1", "")))
	clk := newClock()
	f := newTestFetcher(t, clk)
	ctx := context.Background()
	_, err := f.Key(ctx, srv.URL, "k1")
	require.NoError(t, err)

	// The IdP rotates; the first token with the new kid is within the
	// rate-limit window of the first fetch, so it is refused without a fetch.
	srv.set(http.StatusOK, jwksJSON(jwkJSON(t, &testRSA(t, 0).PublicKey, "k1", ""), jwkJSON(t, &testRSA(t, 1).PublicKey, "k2", "")))
	_, err = f.Key(ctx, srv.URL, "k2")
	require.ErrorIs(t, err, ErrUnknownKey)
	require.ErrorContains(t, err, "rate-limited")
	require.EqualValues(t, 1, srv.fetches.Load())

	clk.Advance(31 * time.Second)
	k, err := f.Key(ctx, srv.URL, "k2")
	require.NoError(t, err)
	require.Equal(t, "k2", k.ID)
	require.EqualValues(t, 2, srv.fetches.Load())

	// A flood of random kids costs at most one fetch per interval.
	for _, kid := range []string{"x1", "x2", "x3", "x4"} {
		_, err := f.Key(ctx, srv.URL, kid)
		require.ErrorIs(t, err, ErrUnknownKey)
	}
	require.EqualValues(t, 2, srv.fetches.Load())
	clk.Advance(31 * time.Second)
	_, err = f.Key(ctx, srv.URL, "x5")
	require.ErrorIs(t, err, ErrUnknownKey)
	require.NotContains(t, err.Error(), "rate-limited")
	require.EqualValues(t, 3, srv.fetches.Load())
}

func TestFetcherHonoursMaxAgeWithinBounds(t *testing.T) {
	cases := []struct {
		cacheControl string
		ttl          time.Duration
	}{
		{"", time.Hour},
		{"public, max-age=300", 300 * time.Second},
		{"max-age=0", time.Minute},            // MinTTL
		{"no-store", time.Minute},             // MinTTL
		{"max-age=999999999", 24 * time.Hour}, // MaxTTL
		{"max-age=banana", time.Hour},         // ignored
		{"max-age=\"600\", must-revalidate", 10 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.cacheControl, func(t *testing.T) {
			srv := newIdPServer(t, jwksJSON(jwkJSON(t, testEd(t).Public(), "k1", "")))
			srv.setCacheControl(c.cacheControl)
			clk := newClock()
			f := newTestFetcher(t, clk)
			ctx := context.Background()
			_, err := f.Key(ctx, srv.URL, "k1")
			require.NoError(t, err)
			clk.Advance(c.ttl)
			_, err = f.Key(ctx, srv.URL, "k1")
			require.NoError(t, err)
			require.EqualValues(t, 1, srv.fetches.Load(), "still fresh at exactly the TTL")
			clk.Advance(time.Second)
			_, err = f.Key(ctx, srv.URL, "k1")
			require.NoError(t, err)
			require.EqualValues(t, 2, srv.fetches.Load(), "stale after the TTL")
		})
	}
}

// An IdP outage must not log everyone out: cached keys keep verifying, and
// the error for a key we do not have says what failed.
func TestFetcherServesCachedKeysWhenEndpointFails(t *testing.T) {
	for name, fail := range map[string]func(*idpServer){
		"down":    func(s *idpServer) { s.set(http.StatusServiceUnavailable, []byte("maintenance")) },
		"garbage": func(s *idpServer) { s.set(http.StatusOK, []byte("<html>oops</html>")) },
		"empty":   func(s *idpServer) { s.set(http.StatusOK, []byte(`{"keys":[]}`)) },
	} {
		t.Run(name, func(t *testing.T) {
			srv := newIdPServer(t, jwksJSON(jwkJSON(t, &testRSA(t, 0).PublicKey, "k1", "")))
			clk := newClock()
			f := newTestFetcher(t, clk)
			ctx := context.Background()
			_, err := f.Key(ctx, srv.URL, "k1")
			require.NoError(t, err)

			fail(srv)
			clk.Advance(2 * time.Hour) // stale: a refresh is due
			k, err := f.Key(ctx, srv.URL, "k1")
			require.NoError(t, err, "cached key must survive a failed refresh")
			require.Equal(t, "k1", k.ID)
			require.EqualValues(t, 2, srv.fetches.Load())

			clk.Advance(time.Minute)
			_, err = f.Key(ctx, srv.URL, "k9")
			require.ErrorIs(t, err, ErrJWKSUnavailable)
			require.ErrorContains(t, err, "refresh failed")
		})
	}
}

func TestFetcherUnavailableWithoutCache(t *testing.T) {
	srv := newIdPServer(t, []byte("not json"))
	clk := newClock()
	f := newTestFetcher(t, clk)
	ctx := context.Background()
	_, err := f.Key(ctx, srv.URL, "k1")
	require.ErrorIs(t, err, ErrJWKSUnavailable)
	require.ErrorContains(t, err, "not a JWK Set")

	srv.set(http.StatusInternalServerError, nil)
	clk.Advance(31 * time.Second)
	_, err = f.Key(ctx, srv.URL, "k1")
	require.ErrorIs(t, err, ErrJWKSUnavailable)
	require.ErrorContains(t, err, "500")

	// Within the interval the last failure is reported without a fetch.
	_, err = f.Key(ctx, srv.URL, "k1")
	require.ErrorIs(t, err, ErrJWKSUnavailable)
	require.ErrorContains(t, err, "rate-limited")
	require.EqualValues(t, 2, srv.fetches.Load())

	srv.Close() // connection refused
	clk.Advance(31 * time.Second)
	_, err = f.Key(ctx, srv.URL, "k1")
	require.ErrorIs(t, err, ErrJWKSUnavailable)
	require.ErrorContains(t, err, "GET "+srv.URL)
}

func TestFetcherConcurrentCallersShareOneFetch(t *testing.T) {
	srv := newIdPServer(t, jwksJSON(jwkJSON(t, &testEC(t).PublicKey, "k1", ES256)))
	gate := make(chan struct{})
	srv.setGate(gate)
	f := newTestFetcher(t, newClock())

	const callers = 16
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := f.Key(context.Background(), srv.URL, "k1")
			errs <- err
		})
	}
	// Whoever arrives while the leader is in the handler joins its fetch;
	// whoever arrives after finds fresh keys. Either way: one fetch.
	require.Eventually(t, func() bool { return srv.fetches.Load() == 1 }, 5*time.Second, time.Millisecond)
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, srv.fetches.Load())
}

func TestFetcherWaiterHonoursItsContext(t *testing.T) {
	srv := newIdPServer(t, jwksJSON(jwkJSON(t, &testEC(t).PublicKey, "k1", "")))
	gate := make(chan struct{})
	srv.setGate(gate)
	f := newTestFetcher(t, newClock())
	leader := make(chan error, 1)
	go func() {
		_, err := f.Key(context.Background(), srv.URL, "k1")
		leader <- err
	}()
	require.Eventually(t, func() bool { return srv.fetches.Load() == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.Key(ctx, srv.URL, "k1")
	require.ErrorIs(t, err, ErrJWKSUnavailable)
	require.True(t, errors.Is(err, ErrJWKSUnavailable))
	close(gate)
	require.NoError(t, <-leader, "the leader's fetch is not cancelled by a waiter")
}

func TestFetcherConfigValidation(t *testing.T) {
	_, err := NewFetcher(FetcherConfig{MinTTL: time.Hour, MaxTTL: time.Minute})
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewFetcher(FetcherConfig{Timeout: -1})
	require.ErrorIs(t, err, ErrConfig)
}

func TestFetcherForget(t *testing.T) {
	srv := newIdPServer(t, jwksJSON(jwkJSON(t, testEd(t).Public(), "k1", "")))
	f := newTestFetcher(t, newClock())
	ctx := context.Background()
	_, err := f.Key(ctx, srv.URL, "k1")
	require.NoError(t, err)
	f.Forget(srv.URL)
	_, err = f.Key(ctx, srv.URL, "k1")
	require.NoError(t, err, "a forgotten URL is fetched again, not rate-limited")
	require.EqualValues(t, 2, srv.fetches.Load())
}
