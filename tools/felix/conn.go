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
	"github.com/felixmq/felix/internal/endpoint"
	"github.com/felixmq/felix/udp/netknobs"
)

// resolve is where the commands connect when their flags do not say
// (internal/endpoint); tests run with an environment of their own.
func resolve() (endpoint.Endpoints, error) { return endpoint.Resolve(os.LookupEnv) }

// connFlags are the connection flags of every command that talks to a
// broker.
type connFlags struct {
	addr, tenant, namespace, stream, token string
	ca, fingerprint                        string
	timeout                                time.Duration
	caExplicit                             bool // --ca was given, not defaulted
	ep                                     endpoint.Endpoints
	epErr                                  error // the context in effect cannot be read
}

// addConnFlags registers the shared flags on set, with the defaults
// resolve gives.
func addConnFlags(set *flag.FlagSet) *connFlags {
	f := &connFlags{}
	f.ep, f.epErr = resolve()
	set.StringVar(&f.addr, "addr", f.ep.Addr.V, "broker QUIC address `host:port` (else $FELIX_ADDR, the context, the dev directory's broker.json)")
	set.StringVar(&f.tenant, "tenant", f.ep.Tenant.V, "tenant (else $FELIX_TENANT, the context)")
	set.StringVar(&f.namespace, "namespace", "default", "namespace")
	set.StringVar(&f.stream, "stream", "demo", "stream")
	set.StringVar(&f.token, "token", "", "auth `TOKEN` (else $FELIX_TOKEN, the context's token file, the dev directory's token)")
	set.StringVar(&f.ca, "ca", f.ep.CA.V, "PEM `FILE` of certificates to trust (else $FELIX_CA, the context, the dev directory's cert.pem)")
	set.StringVar(&f.fingerprint, "fingerprint", "", "pin the broker certificate's SHA-256 (`HEX`) instead of --ca")
	set.DurationVar(&f.timeout, "timeout", 5*time.Second, "timeout for connecting and opening the stream")
	return f
}

// check validates the flags after parsing; an error is a usage error.
func (f *connFlags) check(set *flag.FlagSet) error {
	given := map[string]bool{}
	set.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	f.caExplicit = given["ca"]
	if f.epErr != nil && !(given["addr"] && given["tenant"] && (given["ca"] || given["fingerprint"])) {
		return f.epErr
	}
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
		return nil, fmt.Errorf("no CA: pass --ca or --fingerprint (make run writes %s)", f.ca)
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

// config is the client.Config of the flags.
func (f *connFlags) config(log *slog.Logger) (client.Config, error) {
	tlsConf, err := f.tlsConfig()
	if err != nil {
		return client.Config{}, err
	}
	token, err := devdir.Token(f.token, os.LookupEnv, f.ep.TokenFile.V)
	if err != nil {
		return client.Config{}, err
	}
	nk, err := netknobs.Load(os.LookupEnv)
	if err != nil {
		return client.Config{}, err
	}
	cfg := client.Config{Tenant: f.tenant, Token: token, TLS: tlsConf, Logger: log}
	nk.Apply(&cfg.InitialMTU, &cfg.ConnStatsInterval, &cfg.BlackHoleCooldown)
	return cfg, nil
}

// dial connects to the broker within --timeout; log may be nil. Failures
// say which address was tried and, when no flag gave it, where it came
// from.
func (f *connFlags) dial(ctx context.Context, log *slog.Logger) (*client.Client, error) {
	cfg, err := f.config(log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, err := client.Dial(ctx, f.addr, cfg)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, client.ErrConnectionRefused):
		return nil, fmt.Errorf("connection refused: no broker listens on %s%s", f.addr, f.from())
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("no answer from %s%s within %s: is a broker running there?", f.addr, f.from(), f.timeout)
	}
	return nil, err
}

// from says where the address came from when no flag gave it.
func (f *connFlags) from() string {
	if f.addr != f.ep.Addr.V || f.ep.Addr.From == "default" {
		return ""
	}
	return " (from " + f.ep.Addr.From + ")"
}
