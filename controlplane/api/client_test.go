package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/controlplane/api"
)

// Every refusal is an *api.Error carrying the control plane's error body,
// matching the sentinel of its status; an answer that is not an error body
// keeps its status and text.
func TestClientMapsRefusals(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   error
		code   string
	}{
		{404, `{"code":"not_found","message":"stream t/n/s not found","request_id":"r1"}`, api.ErrNotFound, "not_found"},
		{401, `{"code":"unauthenticated","message":"no token"}`, api.ErrUnauthorized, "unauthenticated"},
		{403, `{"code":"forbidden","message":"no"}`, api.ErrUnauthorized, "forbidden"},
		{409, `{"code":"already_exists","message":"there"}`, api.ErrConflict, "already_exists"},
		{410, `{"code":"resync","message":"gone","revision":7}`, api.ErrResync, "resync"},
		{502, `bad gateway`, nil, "http_502"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := api.NewClient(api.ClientConfig{URL: srv.URL})
			require.NoError(t, err)
			err = c.Do(context.Background(), http.MethodGet, "/v1/x", nil, nil)
			var e *api.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.status, e.Status)
			require.Equal(t, tc.code, e.Code)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			for _, other := range []error{api.ErrNotFound, api.ErrUnauthorized, api.ErrConflict, api.ErrResync} {
				if other != tc.want {
					require.NotErrorIs(t, err, other)
				}
			}
		})
	}
}

// A request carries the credential the Token function gives at that
// moment and its body as JSON; a 2xx answer is decoded into out.
func TestClientSendsTokenAndJSON(t *testing.T) {
	var gotAuth, gotType string
	var gotBody api.NodeTokenRequest
	var decodeErr error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotType = r.Header.Get("Authorization"), r.Header.Get("Content-Type")
		decodeErr = json.NewDecoder(r.Body).Decode(&gotBody)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"token":"minted"}`))
	}))
	defer srv.Close()
	tok := "first"
	c, err := api.NewClient(api.ClientConfig{URL: srv.URL + "/", Token: func() string { return tok }})
	require.NoError(t, err)
	tok = "second"
	var out api.NodeTokenResponse
	require.NoError(t, c.Do(context.Background(), http.MethodPost, "/v1/token/node", api.NodeTokenRequest{Subject: "b1"}, &out))
	require.NoError(t, decodeErr)
	require.Equal(t, "Bearer second", gotAuth)
	require.Equal(t, "application/json", gotType)
	require.Equal(t, "b1", gotBody.Subject)
	require.Equal(t, "minted", out.Token)
	require.Equal(t, srv.URL, c.URL())
}

// No request outlives RequestTimeout, and a long-poll gets its wait on top.
func TestClientRequestTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // a control plane that never answers
	}))
	defer srv.Close()
	c, err := api.NewClient(api.ClientConfig{URL: srv.URL, RequestTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	err = c.Do(context.Background(), http.MethodGet, "/v1/snapshot", nil, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	start := time.Now()
	err = c.Poll(context.Background(), "/v1/changes", 30*time.Millisecond, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "wait + RequestTimeout")
}

func TestNewClientRefusesBadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:7070", "ftp://x", "http://"} {
		_, err := api.NewClient(api.ClientConfig{URL: u})
		require.True(t, errors.Is(err, api.ErrInvalid), "%q: %v", u, err)
	}
}
