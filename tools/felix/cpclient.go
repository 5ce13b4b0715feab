package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/felixmq/felix/controlplane"
	"github.com/felixmq/felix/internal/devdir"
)

// cpFlags are the flags of the commands that talk to the control plane.
type cpFlags struct {
	url, tokenFile string
	timeout        time.Duration
	devToken       bool // without --token-file, send $FELIX_TOKEN or make run's token if there is one
}

// addCPFlags registers the flags. The defaults are those of `make run`'s
// embedded control plane when FELIX_DEV_DIR holds its URL and token.
func addCPFlags(set *flag.FlagSet, withToken bool) *cpFlags {
	f := &cpFlags{devToken: withToken}
	set.StringVar(&f.url, "controlplane", devdir.ControlPlaneURL(os.LookupEnv, "http://127.0.0.1:7070"),
		"control plane base `URL` (default: the one make run writes in $FELIX_DEV_DIR, else http://127.0.0.1:7070)")
	if withToken {
		set.StringVar(&f.tokenFile, "token-file", "", "`FILE` holding the bearer token (a Felix token, or the bootstrap token on the bootstrap listener); default $FELIX_TOKEN, else make run's token file")
	}
	set.DurationVar(&f.timeout, "timeout", 10*time.Second, "timeout of each request")
	return f
}

func (f *cpFlags) check() error {
	u, err := url.Parse(f.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--controlplane %q is not an http(s) URL", f.url)
	}
	if f.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	return nil
}

// cpError is a refusal by the control plane: its JSON error body.
type cpError struct {
	status int
	body   controlplane.ErrorBody
}

func (e *cpError) Error() string {
	return fmt.Sprintf("control plane: %d %s: %s (request %s)", e.status, e.body.Code, e.body.Message, e.body.RequestID)
}

// call sends a request and decodes a 2xx JSON answer into out (raw JSON if
// out is *json.RawMessage). Refusals become *cpError with the server's code.
func (f *cpFlags) call(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(f.url, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if f.tokenFile != "" {
		tok, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	} else if tok, err := devdir.Token("", os.LookupEnv, defaultTokenFile); f.devToken && err == nil {
		// Without one the control plane answers 401 and says what it wants.
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("control plane %s unreachable: %w", f.url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &cpError{status: resp.StatusCode}
		if json.Unmarshal(raw, &e.body) != nil || e.body.Code == "" {
			e.body.Code, e.body.Message = "http_"+fmt.Sprint(resp.StatusCode), strings.TrimSpace(string(raw))
		}
		return e
	}
	return json.Unmarshal(raw, out)
}
