package main

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/internal/devtls"
)

// tlsConfig says how to trust the broker, as `felix pub` does: a pinned
// fingerprint, or a CA file (make run writes its dev directory's
// cert.pem). It never skips verification.
func tlsConfig(ca string, caExplicit bool, fingerprint string) (*tls.Config, error) {
	if fingerprint != "" {
		if caExplicit {
			return nil, errors.New("pass --ca or --fingerprint, not both")
		}
		fp := strings.ToLower(strings.ReplaceAll(fingerprint, ":", ""))
		if b, err := hex.DecodeString(fp); err != nil || len(b) != 32 {
			return nil, errors.New("--fingerprint must be 64 hex digits (a SHA-256)")
		}
		return devtls.PinnedConfig(fp), nil
	}
	pemBytes, err := os.ReadFile(ca)
	if errors.Is(err, fs.ErrNotExist) && !caExplicit {
		return nil, fmt.Errorf("no CA: pass --ca or --fingerprint (make run writes %s)", ca)
	}
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	pool, err := devtls.Pool(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("--ca %s: %w", ca, err)
	}
	return &tls.Config{RootCAs: pool}, nil
}

// dial opens one client connection with the configured receive windows
// (slow subscribers may get smaller ones, see --slow-window).
func dial(ctx context.Context, cfg *Config, slow bool) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	sw, cw := cfg.windows(slow)
	cc := client.Config{
		Tenant: cfg.Tenant, Token: cfg.Token, TLS: cfg.TLS,
		StreamReceiveWindow: uint64(sw), ConnectionReceiveWindow: uint64(cw), Logger: cfg.logger(),
	}
	cfg.Net.Apply(&cc.InitialMTU, &cc.ConnStatsInterval, &cc.BlackHoleCooldown)
	c, err := client.Dial(ctx, cfg.Addr, cc)
	if errors.Is(err, context.DeadlineExceeded) {
		// QUIC gets no "connection refused": silence is all a missing
		// broker looks like.
		return nil, fmt.Errorf("no answer from %s within %s: is a broker running there?", cfg.Addr, cfg.DialTimeout)
	}
	return c, err
}

// windows returns the stream and connection receive windows of a
// subscriber's (or, slow=false, any) connection.
func (c *Config) windows(slow bool) (stream, conn int64) {
	if slow && c.SlowWindow > 0 {
		return c.SlowWindow, 4 * c.SlowWindow
	}
	return c.StreamWindow, c.ConnWindow
}
