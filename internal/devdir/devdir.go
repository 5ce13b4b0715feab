package devdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/felixmq/felix/internal/linux"
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

// ErrNotPrivate: the directory is owned by another user, or others may
// write into it, so whoever that is may have put its files there (a
// control plane URL that collects the token sent to it, a certificate of
// their own).
var ErrNotPrivate = errors.New("devdir: not a private directory")

// Ensure makes dir the broker's private directory: created with mode 0700
// (and its parents), or, if it exists, checked like Check and made 0700.
func Ensure(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	err := os.Mkdir(dir, 0o700)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := owned(dir); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// Check refuses to read from dir unless this user owns it and no one else
// may write into it.
func Check(dir string) error {
	if err := owned(dir); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: %s has mode %v: others may write into it", ErrNotPrivate, dir, fi.Mode().Perm())
	}
	return nil
}

// owned refuses dir unless it is a directory (not a link to one) this user
// owns. Where the platform does not say who owns a file, it is taken as
// owned.
func owned(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (%v)", ErrNotPrivate, dir, fi.Mode().Type())
	}
	if uid, ok := linux.FileOwner(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("%w: %s is owned by user id %d, not by this user (%d)", ErrNotPrivate, dir, uid, os.Getuid())
	}
	return nil
}

// Token is the token a client sends: explicit (its --token flag) when set,
// else $FELIX_TOKEN, else the content of tokenFile, which is read only from
// a private directory (Check). A missing tokenFile is an error that says
// how to get one.
func Token(explicit string, lookup Lookup, tokenFile string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if t, ok := lookup(TokenEnv); ok && t != "" {
		return t, nil
	}
	if err := Check(filepath.Dir(tokenFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("token: %w", err)
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
// there is none or Dir is not private (Check).
func ControlPlaneURL(lookup Lookup, fallback string) string {
	if Check(Dir(lookup)) != nil {
		return fallback
	}
	raw, err := os.ReadFile(Path(lookup, ControlPlaneURLFile))
	if u := strings.TrimSpace(string(raw)); err == nil && u != "" {
		return u
	}
	return fallback
}
