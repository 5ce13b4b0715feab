package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/felixmq/felix/internal/cli"
)

const probeUsage = `usage: felix probe [--timeout D] URL
GETs URL (a broker's /ready or /live, a control plane's /v1/system/health)
and exits 0 on a 2xx answer, 1 otherwise: the health check of images
without curl (deploy/Dockerfile's HEALTHCHECK).`

func newProbeFlags() (*flag.FlagSet, *time.Duration) {
	set := flag.NewFlagSet("felix probe", flag.ContinueOnError)
	return set, set.Duration("timeout", 3*time.Second, "give up after `D`")
}

func runProbe(args []string, stdout, stderr io.Writer) int {
	set, timeout := newProbeFlags()
	pos, err := cli.Parse(set, args)
	if err == nil && (len(pos) != 1 || *timeout <= 0) {
		err = errors.New("want one URL, and a positive --timeout")
	}
	if err != nil {
		return cli.Fail(err, "felix probe", probeUsage, set, stdout, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pos[0], nil)
	if err != nil {
		fmt.Fprintln(stderr, "felix probe:", err)
		return exitUsage
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "felix probe:", err)
		return exitFail
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintln(stderr, "felix probe:", resp.Status)
		return exitFail
	}
	return exitOK
}
