package client

import (
	"crypto/tls"
	"fmt"
	"os"

	"github.com/felixmq/felix/internal/devdir"
	"github.com/felixmq/felix/internal/devtls"
)

// DefaultDevAddr is where `make run`'s broker listens unless it says
// otherwise in its dev directory.
const DefaultDevAddr = "127.0.0.1:5000"

// DevConfig is what it takes to reach the broker `make run` started on
// this machine: its address and a Config trusting its self-signed
// certificate, with the token of its embedded control plane (tenant t1,
// admin rights on t1, valid 24 hours). dir is that broker's dev directory,
// FELIX_DEV_DIR in its environment ("" for /tmp/felix-dev); pass that
// variable's value to follow it as the tools do. The token is
// read only from a directory this user owns and no one else may write
// into. For development: a deployment gives Tenant, Token and TLS itself.
func DevConfig(dir string) (addr string, cfg Config, err error) {
	lookup := func(k string) (string, bool) {
		if k == devdir.DirEnv {
			return dir, dir != ""
		}
		return "", false
	}
	certFile := devdir.Path(lookup, devdir.CertFile)
	pem, err := os.ReadFile(certFile)
	if err != nil {
		return "", Config{}, fmt.Errorf("%w: the broker's certificate (is make run running?): %w", ErrInvalidConfig, err)
	}
	pool, err := devtls.Pool(pem)
	if err != nil {
		return "", Config{}, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, certFile, err)
	}
	token, err := devdir.Token("", lookup, devdir.Path(lookup, devdir.TokenFile))
	if err != nil {
		return "", Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	addr = DefaultDevAddr
	if b, ok := devdir.ReadBroker(lookup); ok {
		addr = b.QUIC
	}
	return addr, Config{Tenant: "t1", Token: token, TLS: &tls.Config{RootCAs: pool}}, nil
}
