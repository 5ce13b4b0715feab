package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/devdir"
	"github.com/felixmq/felix/internal/endpoint"
)

// cpFlags are the flags of the commands that talk to the control plane.
type cpFlags struct {
	url, tokenFile string
	timeout        time.Duration
	devToken       bool // without --token-file, send $FELIX_TOKEN or the context's or make run's token if there is one
	ep             endpoint.Endpoints
	epErr          error
}

// addCPFlags registers the flags, with the defaults resolve gives (the
// embedded control plane of a local broker when there is one).
func addCPFlags(set *flag.FlagSet, withToken bool) *cpFlags {
	f := &cpFlags{devToken: withToken}
	f.ep, f.epErr = resolve()
	set.StringVar(&f.url, "controlplane", f.ep.ControlPlane.V,
		"control plane base `URL` (else $FELIX_CONTROLPLANE, the context, the one a local broker runs, http://127.0.0.1:7070)")
	if withToken {
		set.StringVar(&f.tokenFile, "token-file", "", "`FILE` holding the bearer token (a Felix token, or the bootstrap token on the bootstrap listener); default $FELIX_TOKEN, else the context's or make run's token file")
	}
	set.DurationVar(&f.timeout, "timeout", 10*time.Second, "timeout of each request")
	return f
}

func (f *cpFlags) check() error {
	if f.epErr != nil {
		return f.epErr
	}
	u, err := url.Parse(f.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--controlplane %q is not an http(s) URL", f.url)
	}
	if f.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	return nil
}

// call sends a request and decodes a 2xx JSON answer into out (raw JSON if
// out is *json.RawMessage). Refusals are *api.Error with the server's code.
func (f *cpFlags) call(method, path string, body any, out any) error {
	tok, err := f.bearer()
	if err != nil {
		return err
	}
	cp, err := api.NewClient(api.ClientConfig{URL: f.url, RequestTimeout: f.timeout, Token: func() string { return tok }})
	if err != nil {
		return err
	}
	return cp.Do(context.Background(), method, path, body, out)
}

// bearer is the credential to send: --token-file's, else (for commands
// that take one) $FELIX_TOKEN or make run's token, else none; without one
// the control plane answers 401 and says what it wants.
func (f *cpFlags) bearer() (string, error) {
	if f.tokenFile != "" {
		tok, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		return strings.TrimSpace(string(tok)), nil
	}
	if tok, err := devdir.Token("", os.LookupEnv, f.ep.TokenFile.V); f.devToken && err == nil {
		return tok, nil
	}
	return "", nil
}
