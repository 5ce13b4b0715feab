package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// credential is a bearer token the broker presents to the control plane
// and, as a node credential, to the other brokers. Felix tokens expire
// (FELIX_TOKEN_TTL_S, at most a day), so a broker that read its token once
// would drop out of the cluster and stop following the control plane
// within a token lifetime. A credential stays current: its file is read
// again when it changes (an operator or a sidecar rotating it), and once
// the cluster Agent renews the node credential (POST /v1/token/node), the
// Agent's current token replaces the file's until the file changes again:
// then the Agent adopts the file's.
type credential struct {
	path    string // "" for a fixed token
	renewed atomic.Pointer[renewer]
	mu      struct {
		sync.Mutex
		tok     string
		mod     time.Time
		size    int64
		checked time.Time
	}
}

// credentialRecheck bounds how often Token looks at the file.
const credentialRecheck = time.Second

// fixedCredential is a token that never changes (the embedded control
// plane's, or none).
func fixedCredential(tok string) *credential {
	c := &credential{}
	c.mu.tok = tok
	return c
}

// fileCredential reads the token in path (surrounding white space
// trimmed); knob names the setting in the error.
func fileCredential(knob, path string) (*credential, error) {
	c := &credential{path: path}
	fi, err := os.Stat(path)
	if err == nil {
		var raw []byte
		if raw, err = os.ReadFile(path); err == nil {
			c.mu.tok, c.mu.mod, c.mu.size, c.mu.checked = strings.TrimSpace(string(raw)), fi.ModTime(), fi.Size(), time.Now()
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: %s: %v", errConfig, knob, err)
}

// renewer is what renews the credential: the Agent's Token and Adopt.
type renewer struct {
	token func() string
	adopt func(string)
}

// renewBy makes token (the Agent's) the source from now on, and adopt the
// way a rotated file reaches it.
func (c *credential) renewBy(token func() string, adopt func(string)) {
	c.renewed.Store(&renewer{token: token, adopt: adopt})
}

// Token is the current token. A file that became unreadable or empty
// leaves the last good token in use.
func (c *credential) Token() string {
	tok, rotated := c.fromFile()
	r := c.renewed.Load()
	if r == nil {
		return tok
	}
	if rotated {
		r.adopt(tok)
	}
	return r.token()
}

// fromFile returns the file's token, reading the file again if it changed
// (at most once per credentialRecheck), and whether it did.
func (c *credential) fromFile() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" || time.Since(c.mu.checked) < credentialRecheck {
		return c.mu.tok, false
	}
	c.mu.checked = time.Now()
	fi, err := os.Stat(c.path)
	if err != nil || (fi.ModTime().Equal(c.mu.mod) && fi.Size() == c.mu.size) {
		return c.mu.tok, false
	}
	raw, err := os.ReadFile(c.path)
	tok := strings.TrimSpace(string(raw))
	if err != nil || tok == "" {
		return c.mu.tok, false
	}
	c.mu.mod, c.mu.size = fi.ModTime(), fi.Size()
	if tok == c.mu.tok { // touched, not rotated
		return tok, false
	}
	c.mu.tok = tok
	return tok, true
}
