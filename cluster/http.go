package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// api is a control plane's HTTP endpoint with a bearer credential.
type api struct {
	base   string
	token  func() string
	client *http.Client
}

// newAPI takes a static token, or tokenFunc (which wins) for a credential
// that is renewed.
func newAPI(base, token string, tokenFunc func() string, client *http.Client) (api, error) {
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return api{}, fmt.Errorf("%w: control plane URL %q: want http:// or https://", ErrInvalid, base)
	}
	if tokenFunc == nil {
		if token == "" {
			return api{}, fmt.Errorf("%w: no bearer token", ErrInvalid)
		}
		tokenFunc = func() string { return token }
	}
	if client == nil {
		client = http.DefaultClient
	}
	return api{base: strings.TrimSuffix(base, "/"), token: tokenFunc, client: client}, nil
}

// do sends body (if not nil) as JSON and decodes a 200 answer into out; any
// other status is an *APIError.
func (c api) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("cluster: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("cluster: %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(raw, e) != nil || e.Code == "" {
			e.Code, e.Message = "unknown", strings.TrimSpace(string(raw))
		}
		return e
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("cluster: %s %s: answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}
