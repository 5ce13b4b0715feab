package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// URL is the control plane's base URL, e.g. "http://127.0.0.1:7070".
	URL string
	// Token, if set, returns the bearer credential of each request (asked
	// every time, so a renewed or rotated one is used at once); "" sends
	// none.
	Token func() string
	// RequestTimeout bounds each request; a long-poll (Poll) gets its wait
	// on top. 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// HTTPClient sends the requests (TLS settings, a test's transport); nil
	// uses one of this package's with the default transport. Its own
	// Timeout, if any, applies as well.
	HTTPClient *http.Client
}

// DefaultRequestTimeout bounds a request when ClientConfig.RequestTimeout
// is 0: no call to the control plane waits forever.
const DefaultRequestTimeout = 10 * time.Second

// maxAnswerBytes bounds what a client reads of one answer (a snapshot of a
// large cluster is the biggest).
const maxAnswerBytes = 64 << 20

var defaultHTTPClient = &http.Client{}

// Client is the one HTTP client of the control plane's API: JSON bodies,
// a bearer credential, a deadline on every request, and refusals turned
// into *Error. Safe for concurrent use.
type Client struct {
	base    string
	token   func() string
	timeout time.Duration
	http    *http.Client
}

// NewClient checks cfg and returns a Client; it sends nothing yet.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: control plane URL %q: want http:// or https://", ErrInvalid, cfg.URL)
	}
	if cfg.RequestTimeout < 0 {
		return nil, fmt.Errorf("%w: request timeout %v", ErrInvalid, cfg.RequestTimeout)
	}
	c := &Client{base: strings.TrimSuffix(cfg.URL, "/"), token: cfg.Token, timeout: cfg.RequestTimeout, http: cfg.HTTPClient}
	if c.timeout == 0 {
		c.timeout = DefaultRequestTimeout
	}
	if c.http == nil {
		c.http = defaultHTTPClient
	}
	return c, nil
}

// URL is the control plane's base URL, without a trailing slash.
func (c *Client) URL() string { return c.base }

// Do sends body (if not nil) as JSON and decodes a 2xx answer into out (if
// not nil; a *json.RawMessage takes the answer as it is). Any other status
// is an *Error carrying the control plane's error body. The request is
// bounded by the RequestTimeout and by ctx.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	return c.do(ctx, c.timeout, method, path, body, out)
}

// Poll is Do for a GET the control plane may hold for up to wait (a
// long-poll: the changes feed, the placement), bounded by wait plus the
// RequestTimeout.
func (c *Client) Poll(ctx context.Context, path string, wait time.Duration, out any) error {
	return c.do(ctx, wait+c.timeout, http.MethodGet, path, nil, out)
}

func (c *Client) do(ctx context.Context, timeout time.Duration, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if c.token != nil {
		if tok := c.token(); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("control plane %s unreachable: %s %s: %w", c.base, method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("control plane %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode}
		if json.Unmarshal(raw, &e.ErrorBody) != nil || e.Code == "" {
			e.Code, e.Message = fmt.Sprintf("http_%d", resp.StatusCode), strings.TrimSpace(string(raw))
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("control plane %s %s: the answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}
