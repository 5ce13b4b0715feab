// Package brokertest starts a broker serving real QUIC on 127.0.0.1 in a
// test's process, the way felix-broker serves: TLS with a self-signed
// certificate, the udp conn, optionally the admin API. It is the one
// in-process harness of the broker's, the tools' and the benchmarks' tests,
// like net/http/httptest for a broker. Only tests import it.
//
// Clients connect with client.Dial to Addr using ClientTLS (or, from a
// command line, --ca CAFile or --fingerprint Cert.Fingerprint), tenant
// "t1" and any token: the broker runs the dev verifier unless the Config
// sets one.
package brokertest

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/udp"
)

// Options says what to start besides the broker.
type Options struct {
	// Streams and Caches are created before the broker serves.
	Streams []broker.StreamSpec
	Caches  []broker.CacheSpec
	// Cert is the broker's certificate; nil makes a fresh self-signed one.
	// Brokers sharing one trust each other (cluster tests).
	Cert *devtls.Cert
	// PlainUDP serves on a stock *net.UDPConn instead of the udp conn.
	PlainUDP bool
	// Admin serves the admin API (AdminHandler) on a loopback HTTP server.
	Admin bool
	// CloseMayFail is for a broker whose Close is expected to fail (an
	// injected disk fault): the test closes it and checks the error, and
	// the cleanup does not require a clean Close.
	CloseMayFail bool
}

// Broker is a broker serving on 127.0.0.1 until the test ends (or Close).
type Broker struct {
	*broker.Broker
	// Addr is the QUIC address; Admin the admin API's host:port (with
	// Options.Admin).
	Addr, Admin string
	// PacketConn is the socket the broker serves on.
	PacketConn net.PacketConn
	// Cert is the broker's certificate; CAFile holds its PEM, for a
	// client's --ca; ClientTLS trusts it.
	Cert      *devtls.Cert
	CAFile    string
	ClientTLS *tls.Config

	opts      Options
	admin     *httptest.Server
	serving   bool
	served    chan error
	closeOnce sync.Once
}

// TB is what Start needs of a test: testing.TB has it, and so has the
// stand-in StartForMain gives a TestMain.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	FailNow()
}

var _ TB = testing.TB(nil)

// Start starts a broker with cfg (its TLS and listen address are filled
// in) and serves it until the test ends.
func Start(t TB, cfg broker.Config, opts Options) *Broker {
	t.Helper()
	cert := opts.Cert
	if cert == nil {
		var err error
		cert, err = devtls.SelfSigned()
		require.NoError(t, err)
	}
	pool, err := devtls.Pool(cert.PEM)
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "cert.pem")
	require.NoError(t, os.WriteFile(caFile, cert.PEM, 0o644))
	var pc net.PacketConn
	if opts.PlainUDP {
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
	} else {
		pc, err = udp.Listen("udp", "127.0.0.1:0", udp.Config{})
	}
	require.NoError(t, err)
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	cfg.ListenAddrs = []string{pc.LocalAddr().String()}
	b, err := broker.New(cfg)
	if err != nil {
		pc.Close()
	}
	require.NoError(t, err)
	h := &Broker{Broker: b, Addr: pc.LocalAddr().String(), PacketConn: pc, Cert: cert, CAFile: caFile,
		ClientTLS: &tls.Config{RootCAs: pool}, opts: opts, served: make(chan error, 1)}
	t.Cleanup(func() { h.Close(t) })
	for _, s := range opts.Streams {
		require.NoError(t, b.CreateStream(s))
	}
	for _, c := range opts.Caches {
		require.NoError(t, b.CreateCache(c))
	}
	h.serving = true
	go func() { h.served <- b.Serve(pc) }()
	select {
	case <-b.Listening():
	case err := <-h.served:
		h.served <- err // for Close
		t.Fatalf("brokertest: Serve: %v", err)
	}
	if opts.Admin {
		h.admin = httptest.NewServer(b.AdminHandler())
		h.Admin = strings.TrimPrefix(h.admin.URL, "http://")
	}
	return h
}

// Close stops the admin server and the broker, waits for Serve to return
// and closes the socket; it requires both to end cleanly unless
// Options.CloseMayFail. The cleanup calls it; calling it sooner (a
// benchmark closing its clients first, a restart) is fine, and later calls
// do nothing.
func (h *Broker) Close(t TB) {
	h.closeOnce.Do(func() {
		if h.admin != nil {
			h.admin.Close()
		}
		err := h.Broker.Close()
		if !h.opts.CloseMayFail {
			require.NoError(t, err)
		}
		if h.serving {
			select {
			case err := <-h.served:
				if !h.opts.CloseMayFail {
					require.NoError(t, err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("brokertest: Serve did not return after Close")
			}
		}
		h.PacketConn.Close()
	})
}

// StartForMain is Start for a TestMain (examples have no *testing.T): it
// panics where Start would fail the test, and stop closes the broker and
// removes its files.
func StartForMain(cfg broker.Config, opts Options) (b *Broker, stop func()) {
	m := &mainTB{}
	b = Start(m, cfg, opts)
	return b, m.cleanup
}

// mainTB is a TB outside any test: failures panic.
type mainTB struct {
	cleanups []func()
	dirs     []string
}

func (m *mainTB) Helper() {}

func (m *mainTB) TempDir() string {
	d, err := os.MkdirTemp("", "brokertest-")
	if err != nil {
		panic("brokertest: " + err.Error())
	}
	m.dirs = append(m.dirs, d)
	return d
}

func (m *mainTB) Cleanup(f func()) { m.cleanups = append(m.cleanups, f) }
func (m *mainTB) Errorf(format string, args ...any) {
	panic(fmt.Sprintf("brokertest: "+format, args...))
}
func (m *mainTB) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("brokertest: "+format, args...))
}
func (m *mainTB) FailNow() { panic("brokertest: failed") }

func (m *mainTB) cleanup() {
	for i := len(m.cleanups) - 1; i >= 0; i-- {
		m.cleanups[i]()
	}
	for _, d := range m.dirs {
		os.RemoveAll(d)
	}
}
