package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/internal/devdir"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/internal/knob"
	"github.com/felixmq/felix/ioruntime"
	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/udp"
)

// errConfig marks failures that a deployment change fixes (a bind that cannot
// be had, for instance); they exit with status 2 like bad knob values.
var errConfig = errors.New("felix-broker: configuration")

// serve runs the broker until ctx ends (SIGTERM/SIGINT), then drains it
// within FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS.
//
// A start that fails changes nothing in the dev directory: it is claimed
// once every listener is bound (a second broker on it is refused, so it
// never replaces the certificate the first one's clients trust), and
// written once the broker serves.
func serve(ctx context.Context, vals *knob.Values, log *slog.Logger) error {
	tlsConf, devCert, err := loadTLS(vals, log)
	if err != nil {
		return err
	}
	cfg := brokerConfig(vals, log)
	cfg.TLS = tlsConf
	emb, err := startEmbeddedCP(vals, log)
	if err != nil {
		return err
	}
	var cps *cpSync
	if emb != nil {
		defer emb.Close()
		cfg.Catalog = emb
		cps, err = followControlPlane(emb.url, fixedCredential(emb.feedToken), &cfg, log)
	} else {
		cps, err = controlPlaneAuth(vals, &cfg, log)
		if url := knobControlPlane.Get(vals); url != "" {
			cfg.Catalog = elsewhere{url}
		}
	}
	if err != nil {
		return err
	}
	if err := adminAuth(vals, &cfg, log); err != nil {
		return err
	}
	node, err := clusterSetup(vals, &cfg, cps, log)
	if err != nil {
		return err
	}
	if node != nil {
		defer node.close()
	}
	b, err := broker.New(cfg)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	if err := provision(ctx, vals, b, emb, cps, node != nil, log); err != nil {
		return err
	}
	// The broker takes any net.PacketConn: this is the transport seam.
	pc, closeConn, err := listenPacket(vals, log)
	if err != nil {
		return err
	}
	defer closeConn()
	ln, err := net.Listen("tcp", knobAdminBind.Get(vals))
	if err != nil {
		return fmt.Errorf("%w: FELIX_ADMIN_BIND: %v", errConfig, err)
	}
	var dev *devdir.Claim
	if devCert != nil || emb != nil {
		if dev, err = claimDevDir(vals); err != nil {
			ln.Close()
			return err
		}
		defer dev.Release()
	}
	admin := &http.Server{Handler: b.AdminHandler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- admin.Serve(ln) }()
	go func() { errc <- b.Serve(pc) }()
	select {
	case <-b.Listening():
	case err := <-errc:
		return err
	}
	if node != nil {
		if err := node.start(ctx, vals, b, pc.LocalAddr().String(), ln.Addr().String()); err != nil {
			return err
		}
	}
	if dev != nil {
		if err := publishDevDir(dev, devCert, emb, pc.LocalAddr().String(), ln.Addr().String(), log); err != nil {
			return err
		}
	}
	log.Info("felix-broker ready", "quic", pc.LocalAddr().String(), "admin", ln.Addr().String())

	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	if node != nil {
		node.leave() // its shards move before the drain ends its connections
	}
	drain(vals, b, admin, log)
	return nil
}

// provision brings the broker's streams and caches into being: it registers
// FELIX_STREAMS and FELIX_CACHES, and the durable ones the data directory
// reopened, at the embedded control plane (if any),
// starts following the control plane, whose snapshot may create them and
// others, then creates what is still missing (not in cluster mode, where
// streams belong to the control plane).
func provision(ctx context.Context, vals *knob.Values, b *broker.Broker, emb *embeddedCP, cps *cpSync, clustered bool, log *slog.Logger) error {
	specs, _ := parseStreamList(knobStreams.Get(vals)) // validated by the registry
	caches, _ := parseCacheList(knobCaches.Get(vals))  // validated by the registry
	if emb != nil {
		// The durable streams and caches the data directory's catalog
		// reopened are the embedded control plane's too: it lists them
		// and can delete them.
		if err := emb.register(append(specs, b.Streams()...), append(caches, b.Caches()...)); err != nil {
			return err
		}
	}
	if cps != nil {
		if err := cps.start(ctx, b); err != nil {
			return err
		}
	}
	if clustered && emb == nil {
		// A stream only this broker knows is never placed, so a cluster
		// broker would refuse it (owner_unavailable); streams belong to
		// the control plane.
		if raw, _ := vals.Raw("FELIX_STREAMS"); raw != "" {
			log.Warn("FELIX_STREAMS ignored in cluster mode: create streams at the control plane", "streams", raw)
		}
		specs = nil
	}
	for _, s := range specs {
		// A durable stream from an earlier run was reopened from the data
		// directory's catalog already.
		if err := b.CreateStream(s); err != nil && !errors.Is(err, broker.ErrStreamExists) {
			return fmt.Errorf("%w: FELIX_STREAMS: %v", errConfig, err)
		}
	}
	for _, s := range caches {
		if err := b.CreateCache(s); err != nil && !errors.Is(err, broker.ErrCacheExists) {
			return fmt.Errorf("%w: FELIX_CACHES: %v", errConfig, err)
		}
	}
	return nil
}

// drain ends the broker's connections within FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS.
func drain(vals *knob.Values, b *broker.Broker, admin *http.Server, log *slog.Logger) {
	budget := knobShutdownDrain.Get(vals)
	log.Info("draining", "budget", budget)
	dctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	derr := b.Drain(dctx)
	admin.Shutdown(dctx)
	if derr != nil {
		log.Warn("drain budget exceeded; remaining connections closed", "err", derr)
	}
	log.Info("stopped", "buffers_outstanding", b.Pool().BuffersOutstanding)
}

func brokerConfig(vals *knob.Values, log *slog.Logger) broker.Config {
	policy := map[string]fanout.Policy{"drop_new": fanout.DropNew, "drop_old": fanout.DropOld, "block": fanout.Block}
	delay := knobBatchDelay.Get(vals)
	if delay == 0 {
		delay = fanout.NoDelay // the knob's 0 means "do not wait"; the Config's 0 means default
	}
	nk := netKnobs.Get(vals)
	resetMissing, _ := parseStreamKeys(knobResetMissing.Get(vals)) // validated by the registry
	ring := int(knobRingEvents.Get(vals))
	if ring == 0 {
		ring = -1 // the knob's 0 means none; the Config's 0 means default
	}
	queueBudget := knobQueueTotal.Get(vals)
	if queueBudget == 0 {
		queueBudget = -1 // likewise
	}
	seriesBound := func(n int64) int { // likewise
		if n == 0 {
			return -1
		}
		return int(n)
	}
	return broker.Config{
		ListenAddrs:   []string{knobQUICBind.Get(vals), knobAdminBind.Get(vals)},
		MaxFrameBytes: uint32(knobMaxFrameBytes.Get(vals)),
		Queue: fanout.Config{Capacity: int(knobQueue.Get(vals)), MaxBytes: int(knobQueueBytes.Get(vals)),
			Policy: policy[knobQueuePolicy.Get(vals)]},
		QueueBudget:         queueBudget,
		DurableDrops:        !knobDurableCatchUp.Get(vals),
		SlowConsumerTimeout: knobBlockTimeout.Get(vals),
		Batch: fanout.BatchConfig{
			MaxEvents: int(knobBatchEvents.Get(vals)),
			MaxBytes:  int(knobBatchBytes.Get(vals)),
			MaxDelay:  delay,
		},
		Groups: broker.GroupConfig{
			MaxAttempts:   uint32(knobGroupMaxAttempts.Get(vals)),
			MaxInFlight:   int(knobGroupMaxInFlight.Get(vals)),
			Visibility:    knobGroupVisibility.Get(vals),
			MaxVisibility: knobGroupMaxVisibility.Get(vals),
			MaxWait:       knobGroupMaxWait.Get(vals),
		},
		RecordPublishers:          knobRecordPublishers.Get(vals),
		RingEvents:                ring,
		AdmitTimeout:              knobAdmitTimeout.Get(vals),
		RaftTick:                  knobRaftTick.Get(vals),
		RaftElectionTicks:         int(knobRaftElectionTicks.Get(vals)),
		RaftHeartbeatTicks:        int(knobRaftHeartbeatTicks.Get(vals)),
		QuorumTimeout:             knobQuorumTimeout.Get(vals),
		RaftCatchUpBytesPerSecond: knobRaftCatchUp.Get(vals),
		IngressDrop:               knobIngressPolicy.Get(vals) == "drop",
		MaxSubscriptionsPerConn:   int(knobMaxSubs.Get(vals)),
		MaxConnections:            int(knobMaxConns.Get(vals)),
		MaxConnectionsPerSource:   int(knobMaxConnsSource.Get(vals)),
		MaxIncomingStreams:        knobMaxStreams.Get(vals),
		AuthTimeout:               knobAuthTimeout.Get(vals),
		PreAuthMaxFrameBytes:      uint32(knobPreAuthFrame.Get(vals)),
		PreAuthMaxStreams:         int(knobPreAuthStreams.Get(vals)),
		FrameBufferBytes:          knobFrameBudget.Get(vals),
		StreamReceiveWindow:       uint64(knobStreamWindow.Get(vals)),
		ConnectionReceiveWindow:   uint64(knobConnWindow.Get(vals)),
		InitialMTU:                nk.InitialMTU,
		ConnStatsInterval:         nk.ConnStatsInterval,
		NoConnTrace:               !knobConnTrace.Get(vals),
		BlackHoleCooldown:         nk.BlackHoleCooldown,
		MetricsStreamSeries:       seriesBound(knobMetricsStreams.Get(vals)),
		MetricsShardSeries:        seriesBound(knobMetricsShards.Get(vals)),
		DataDir:                   knobDataDir.Get(vals),
		FsyncInterval:             knobFsyncInterval.Get(vals),
		RetentionInterval:         knobRetentionInterval.Get(vals),
		TenantDurableBytes:        knobTenantDurable.Get(vals),
		ResetMissing:              resetMissing,
		DataMinFreeBytes:          minFree(knobMinFree.Get(vals)),
		Storage: segment.Config{
			SegmentBytes:       knobSegmentBytes.Get(vals),
			InitialAllocBytes:  knobInitialAlloc.Get(vals),
			IndexSpacingBytes:  knobIndexSpacing.Get(vals),
			RetentionBytes:     knobRetentionBytes.Get(vals),
			RetentionAge:       knobRetentionMS.Get(vals),
			RepairChecksumTail: knobRepairTail.Get(vals),
			VerifyAllOnOpen:    knobVerifyAll.Get(vals),
			MaxMappedSegments:  int(knobMaxMapped.Get(vals)),
			WriteMode:          map[string]segment.WriteMode{"fd": segment.WriteModeFD, "mapped": segment.WriteModeMapped}[knobWriteMode.Get(vals)],
		},
		Logger: log,
	}
}

// minFree maps FELIX_DATA_MIN_FREE_BYTES, where 0 means none, to
// broker.Config.DataMinFreeBytes, where 0 means the default.
func minFree(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// loadTLS loads the configured certificate, or generates a self-signed one
// and logs its fingerprint; the second result is then the certificate to
// write for local clients (nil for a loaded one).
func loadTLS(vals *knob.Values, log *slog.Logger) (*tls.Config, []byte, error) {
	certFile, keyFile := knobTLSCert.Get(vals), knobTLSKey.Get(vals)
	if (certFile == "") != (keyFile == "") {
		return nil, nil, fmt.Errorf("%w: FELIX_TLS_CERT_FILE and FELIX_TLS_KEY_FILE must be set together", errConfig)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: TLS certificate: %v", errConfig, err)
		}
		log.Info("tls certificate loaded", "file", certFile, "sha256", devtls.Fingerprint(cert.Certificate[0]))
		return &tls.Config{Certificates: []tls.Certificate{cert}}, nil, nil
	}
	host, _, _ := net.SplitHostPort(knobQUICBind.Get(vals))
	c, err := devtls.SelfSigned(host)
	if err != nil {
		return nil, nil, err
	}
	log.Info("tls: generated a self-signed certificate", "sha256", c.Fingerprint)
	return &tls.Config{Certificates: []tls.Certificate{c.TLS}}, c.PEM, nil
}

// claimDevDir takes FELIX_DEV_DIR for this broker before anything is
// written into it; one held by another running broker stops the start.
func claimDevDir(vals *knob.Values) (*devdir.Claim, error) {
	dir := knobDevDir.Get(vals)
	dev, err := devdir.Take(dir)
	switch {
	case errors.Is(err, devdir.ErrNotPrivate):
		return nil, fmt.Errorf("%w: FELIX_DEV_DIR: %v; set FELIX_DEV_DIR to a directory of your own", errConfig, err)
	case errors.Is(err, devdir.ErrInUse):
		return nil, fmt.Errorf("%w: FELIX_DEV_DIR: %v; stop that broker, or give this one a FELIX_DEV_DIR of its own "+
			"(its clients then need that FELIX_DEV_DIR too)", errConfig, err)
	case err != nil:
		return nil, fmt.Errorf("%w: FELIX_DEV_DIR: %v", errConfig, err)
	}
	return dev, nil
}

// publishDevDir writes, once the broker's listeners are bound, what local
// clients read: the self-signed certificate, the embedded control plane's
// token and URL, and where the broker listens (broker.json).
func publishDevDir(dev *devdir.Claim, cert []byte, emb *embeddedCP, quicAddr, adminAddr string, log *slog.Logger) error {
	if cert != nil {
		if err := dev.WriteFile(devdir.CertFile, string(cert), 0o644); err != nil {
			return fmt.Errorf("%w: FELIX_DEV_DIR: %v", errConfig, err)
		}
		log.Info("tls: self-signed certificate written for local clients", "path", filepath.Join(dev.Dir(), devdir.CertFile))
	}
	info := devdir.Broker{PID: os.Getpid(), QUIC: quicAddr, Admin: adminAddr}
	if emb != nil {
		if err := emb.publish(dev); err != nil {
			return err
		}
		info.ControlPlane = emb.url
	}
	if err := dev.WriteBroker(info); err != nil {
		return fmt.Errorf("%w: FELIX_DEV_DIR: %v", errConfig, err)
	}
	return nil
}

// listenPacket opens the QUIC socket: the batched udp conn (recvmmsg, GRO
// split, GSO) by default, a stock *net.UDPConn with FELIX_UDP_PLAIN.
func listenPacket(vals *knob.Values, log *slog.Logger) (net.PacketConn, func(), error) {
	addr := knobQUICBind.Get(vals)
	if knobPlainUDP.Get(vals) {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: FELIX_QUIC_BIND: %v", errConfig, err)
		}
		return pc, func() { pc.Close() }, nil
	}
	if !knobUDPGSO.Get(vals) {
		// quic-go decides GSO from this variable when a Transport wraps its
		// conn; a wrapped socket cannot fail quic-go's UDP_SEGMENT probe, so
		// the binary (never a library) sets it. See udp/doc.go.
		os.Setenv("QUIC_GO_DISABLE_GSO", "true")
	}
	cpus, _ := parseCPUList(knobIOPinCPUs.Get(vals)) // validated by the registry
	rt, err := ioruntime.New(ioruntime.Config{Threads: int(knobIOThreads.Get(vals)), CPUs: cpus, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: FELIX_IO_RUNTIME_THREADS: %v", errConfig, err)
	}
	pc, err := udp.Listen("udp", addr, udp.Config{
		DisableGRO:        !knobUDPGRO.Get(vals),
		DisableGSO:        !knobUDPGSO.Get(vals),
		SocketBufferBytes: int(knobSocketBuffer.Get(vals)),
		Reader:            rt.Assign(ioruntime.RoleServer, 0),
		Logger:            log,
	})
	if err != nil {
		rt.Close()
		return nil, nil, fmt.Errorf("%w: FELIX_QUIC_BIND: %v", errConfig, err)
	}
	return pc, func() { pc.Close(); rt.Close() }, nil
}
