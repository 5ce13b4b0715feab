// Package etcdtest starts an embedded etcd server for tests
// (go.etcd.io/etcd/server/v3/embed) on loopback ports. Only tests import
// it: it links the whole etcd server.
package etcdtest

import (
	"errors"
	"net"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is a running embedded etcd.
type Server struct {
	// Endpoint is its client address, host:port.
	Endpoint string
	e        *embed.Etcd
	dir      string
}

// Start starts a single-member etcd in a fresh temporary directory, on
// free loopback ports, and waits up to 20 s for it to serve.
func Start() (*Server, error) {
	dir, err := os.MkdirTemp("", "felix-etcd-")
	if err != nil {
		return nil, err
	}
	client, err := freeURL()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	peer, err := freeURL()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	// The embedded server logs its own shutdown as errors; tests report
	// what matters through the client.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Endpoint: client.Host, e: e, dir: dir}
	select {
	case <-e.Server.ReadyNotify():
		return s, nil
	case <-time.After(20 * time.Second):
		s.Close()
		return nil, errors.New("etcdtest: not ready within 20s")
	}
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.e.Close()
	os.RemoveAll(s.dir)
}

// freeURL is an http URL on a loopback port that was free a moment ago.
func freeURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}
