package main

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/devdir"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/udp/netknobs"
)

// defaultCAFile and defaultTokenFile are where `make run` writes its
// generated certificate and its embedded control plane's dev token for
// local clients (FELIX_DEV_DIR, default /tmp/felix-dev). Variables so
// tests can point them elsewhere.
var (
	defaultCAFile    = devdir.Path(os.LookupEnv, devdir.CertFile)
	defaultTokenFile = devdir.Path(os.LookupEnv, devdir.TokenFile)
)

// connFlags are the connection flags shared by `felix pub` and `felix sub`.
type connFlags struct {
	addr, tenant, namespace, stream, token string
	ca, fingerprint                        string
	timeout                                time.Duration
	caExplicit                             bool // --ca was given, not defaulted
}

// addConnFlags registers the shared flags on set.
func addConnFlags(set *flag.FlagSet) *connFlags {
	f := &connFlags{}
	set.StringVar(&f.addr, "addr", "127.0.0.1:5000", "broker QUIC address `host:port`")
	set.StringVar(&f.tenant, "tenant", "t1", "tenant")
	set.StringVar(&f.namespace, "namespace", "default", "namespace")
	set.StringVar(&f.stream, "stream", "demo", "stream")
	set.StringVar(&f.token, "token", "", "auth `TOKEN` (default $FELIX_TOKEN, else the token file make run writes in $FELIX_DEV_DIR)")
	set.StringVar(&f.ca, "ca", defaultCAFile, "PEM `FILE` of certificates to trust")
	set.StringVar(&f.fingerprint, "fingerprint", "", "pin the broker certificate's SHA-256 (`HEX`) instead of --ca")
	set.DurationVar(&f.timeout, "timeout", 5*time.Second, "timeout for connecting and opening the stream")
	return f
}

// check validates the flags after set.Parse; an error is a usage error.
func (f *connFlags) check(set *flag.FlagSet) error {
	set.Visit(func(fl *flag.Flag) { f.caExplicit = f.caExplicit || fl.Name == "ca" })
	if f.fingerprint != "" {
		if f.caExplicit {
			return errors.New("pass --ca or --fingerprint, not both")
		}
		// Accept the colon-separated upper-case form openssl prints too.
		f.fingerprint = strings.ToLower(strings.ReplaceAll(f.fingerprint, ":", ""))
		if b, err := hex.DecodeString(f.fingerprint); err != nil || len(b) != 32 {
			return errors.New("--fingerprint must be 64 hex digits (a SHA-256)")
		}
	}
	if f.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	return nil
}

// tlsConfig says how to trust the broker. It never falls back to skipping
// verification: without a CA file or a pin it is an error.
func (f *connFlags) tlsConfig() (*tls.Config, error) {
	if f.fingerprint != "" {
		return devtls.PinnedConfig(f.fingerprint), nil
	}
	pemBytes, err := os.ReadFile(f.ca)
	if errors.Is(err, fs.ErrNotExist) && !f.caExplicit {
		return nil, fmt.Errorf("no CA: pass --ca or --fingerprint (make run writes %s)", defaultCAFile)
	}
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	pool, err := devtls.Pool(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("--ca %s: %w", f.ca, err)
	}
	return &tls.Config{RootCAs: pool}, nil
}

// dial connects to the broker within --timeout; log may be nil.
func (f *connFlags) dial(ctx context.Context, log *slog.Logger) (*client.Client, error) {
	tlsConf, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	token, err := devdir.Token(f.token, os.LookupEnv, defaultTokenFile)
	if err != nil {
		return nil, err
	}
	nk, err := netknobs.Load(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	cfg := client.Config{Tenant: f.tenant, Token: token, TLS: tlsConf, Logger: log}
	nk.Apply(&cfg.InitialMTU, &cfg.ConnStatsInterval, &cfg.BlackHoleCooldown)
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, err := client.Dial(ctx, f.addr, cfg)
	if errors.Is(err, context.DeadlineExceeded) {
		// QUIC gets no "connection refused": silence is all a missing
		// broker looks like, so say what it probably means.
		return nil, fmt.Errorf("no answer from %s within %s: is a broker running there?", f.addr, f.timeout)
	}
	return c, err
}
