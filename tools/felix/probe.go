package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

const probeUsage = `usage: felix probe [--timeout D] URL
GETs URL (a broker's /ready or /live, a control plane's /v1/system/health)
and exits 0 on a 2xx answer, 1 otherwise: the health check of images
without curl (deploy/Dockerfile's HEALTHCHECK).`

func runProbe(args []string, _, stderr io.Writer) int {
	set := flag.NewFlagSet("felix probe", flag.ContinueOnError)
	set.SetOutput(stderr)
	set.Usage = func() { fmt.Fprintln(stderr, probeUsage); set.PrintDefaults() }
	timeout := set.Duration("timeout", 3*time.Second, "give up after `D`")
	if err := set.Parse(args); err != nil || set.NArg() != 1 || *timeout <= 0 {
		if err == nil {
			fmt.Fprintln(stderr, probeUsage)
		}
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, set.Arg(0), nil)
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
