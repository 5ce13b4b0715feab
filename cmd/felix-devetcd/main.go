// Command felix-devetcd runs a single-member etcd for a local Felix
// cluster (scripts/cluster.sh) on a machine without an etcd binary: the
// etcd server the control plane's tests embed, started with flags. It is
// for development only: one member, no TLS, no authentication, so it
// refuses a non-loopback address. Production runs etcd itself.
//
//	felix-devetcd --dir DIR [--client 127.0.0.1:2379] [--peer 127.0.0.1:2380]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/internal/netaddr"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: felix-devetcd --dir DIR [--client 127.0.0.1:2379] [--peer 127.0.0.1:2380]
       felix-devetcd version
A single-member etcd on loopback for scripts/cluster.sh, for development
only: no TLS, no authentication.`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && cli.IsVersion(args[0]) {
		fmt.Fprintln(stdout, cli.VersionLine("felix-devetcd"))
		return 0
	}
	set := flag.NewFlagSet("felix-devetcd", flag.ContinueOnError)
	dir := set.String("dir", "", "data `DIR`ectory (required)")
	client := set.String("client", "127.0.0.1:2379", "client `host:port` (loopback)")
	peer := set.String("peer", "127.0.0.1:2380", "peer `host:port` (loopback)")
	pos, err := cli.Parse(set, args)
	if err == nil && (*dir == "" || len(pos) > 0 || !netaddr.Loopback(*client) || !netaddr.Loopback(*peer)) {
		err = errors.New("--dir is required, and --client and --peer must be loopback addresses")
	}
	if err != nil {
		return cli.Fail(err, "felix-devetcd", usage, set, stdout, stderr)
	}
	if err := serve(ctx, *dir, *client, *peer, stderr); err != nil {
		fmt.Fprintln(stderr, "felix-devetcd:", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, dir, client, peer string, stderr io.Writer) error {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Name = "felix-dev"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu, pu := url.URL{Scheme: "http", Host: client}, url.URL{Scheme: "http", Host: peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		return errors.New("not ready within 30s")
	}
	fmt.Fprintf(stderr, "felix-devetcd ready client=%s dir=%s\n", client, dir)
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return err
	}
}
