package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// felix cert makes a CA once and signs certificates for the hosts given,
// with private keys only their owner reads; a client trusting ca.pem
// accepts a server presenting one.
func TestCertSignsHostCertificatesWithOneCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	code, out, stderr := runCLI("cert", "--dir", dir, "--host", "127.0.0.1,broker-1.example")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, "ca.pem")
	ca, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	code, out, stderr = runCLI("cert", "--dir", dir, "--host", "broker-2.example", "--name", "b2")
	require.Equal(t, exitOK, code, stderr)
	require.NotContains(t, out, "ca.pem", "the CA is made once")
	again, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	require.Equal(t, ca, again)
	for _, key := range []string{"ca-key.pem", "broker-key.pem", "b2-key.pem"} {
		fi, err := os.Stat(filepath.Join(dir, key))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), key)
	}

	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "broker.pem"), filepath.Join(dir, "broker-key.pem"))
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()

	code, _, _ = runCLI("probe", srv.URL)
	require.Equal(t, exitFail, code, "felix probe trusts the system roots only")
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ready" {
			http.Error(w, "draining", http.StatusServiceUnavailable)
		}
	}))
	defer plain.Close()
	code, _, _ = runCLI("probe", plain.URL+"/ready")
	require.Equal(t, exitOK, code)
	code, _, _ = runCLI("probe", plain.URL+"/other")
	require.Equal(t, exitFail, code)
	code, _, _ = runCLI("cert", "--dir", dir)
	require.Equal(t, exitUsage, code)
}
