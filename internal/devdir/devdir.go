package devdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Default is the directory when FELIX_DEV_DIR is unset or empty.
const Default = "/tmp/felix-dev"

// The files of the directory.
const (
	CertFile            = "cert.pem"
	TokenFile           = "token"
	ControlPlaneURLFile = "controlplane.url"
)

// DirEnv names the directory; TokenEnv overrides the token file.
const (
	DirEnv   = "FELIX_DEV_DIR"
	TokenEnv = "FELIX_TOKEN"
)

// Lookup reads an environment variable, as os.LookupEnv does.
type Lookup func(string) (string, bool)

// Dir is $FELIX_DEV_DIR, or Default.
func Dir(lookup Lookup) string {
	if d, ok := lookup(DirEnv); ok && d != "" {
		return d
	}
	return Default
}

// Path is the file name in Dir.
func Path(lookup Lookup, name string) string { return filepath.Join(Dir(lookup), name) }

// Token is the token a client sends: explicit (its --token flag) when set,
// else $FELIX_TOKEN, else the content of tokenFile. A missing tokenFile is
// an error that says how to get one.
func Token(explicit string, lookup Lookup, tokenFile string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if t, ok := lookup(TokenEnv); ok && t != "" {
		return t, nil
	}
	raw, err := os.ReadFile(tokenFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no token: pass --token or set %s (make run writes %s)", TokenEnv, tokenFile)
	}
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", tokenFile)
	}
	return tok, nil
}

// ControlPlaneURL is the content of the URL file in Dir, or fallback when
// there is none.
func ControlPlaneURL(lookup Lookup, fallback string) string {
	raw, err := os.ReadFile(Path(lookup, ControlPlaneURLFile))
	if u := strings.TrimSpace(string(raw)); err == nil && u != "" {
		return u
	}
	return fallback
}
