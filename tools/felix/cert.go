package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/internal/devtls"
)

const certUsage = `usage: felix cert --dir DIR --host H[,H...] [--name NAME]
Makes a small certificate authority in DIR (ca.pem, ca-key.pem) unless one
is there, and signs a server certificate valid for the hosts (IP addresses
or DNS names: every name clients and other brokers dial): DIR/NAME.pem and
DIR/NAME-key.pem (default NAME broker). Brokers take them as
FELIX_TLS_CERT_FILE and FELIX_TLS_KEY_FILE; clients (--ca) and brokers
forwarding to each other (FELIX_CLUSTER_CA_FILE) trust ca.pem. For trying
Felix on a few hosts: production uses its own PKI. Keys are written 0600.`

func newCertFlags() (*flag.FlagSet, *string, *string, *string) {
	set := flag.NewFlagSet("felix cert", flag.ContinueOnError)
	dir := set.String("dir", "", "`DIR` holding the CA and the certificates")
	hosts := set.String("host", "", "comma list of the `H`osts the certificate is valid for")
	name := set.String("name", "broker", "file `NAME` of the certificate")
	return set, dir, hosts, name
}

func runCert(args []string, stdout, stderr io.Writer) int {
	set, dir, hosts, name := newCertFlags()
	pos, err := cli.Parse(set, args)
	if err == nil && (*dir == "" || len(splitComma(*hosts)) == 0 || *name == "" || len(pos) > 0) {
		err = errors.New("--dir and --host are required, and no arguments")
	}
	if err != nil {
		return cli.Fail(err, "felix cert", certUsage, set, stdout, stderr)
	}
	ca, created, err := loadOrMakeCA(*dir)
	if err == nil {
		var cert, key []byte
		if cert, key, err = ca.Issue(splitComma(*hosts)...); err == nil {
			err = writeFiles(*dir, map[string][]byte{*name + ".pem": cert, *name + "-key.pem": key})
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "felix cert:", err)
		return exitFail
	}
	if created {
		fmt.Fprintln(stdout, filepath.Join(*dir, "ca.pem"))
	}
	fmt.Fprintln(stdout, filepath.Join(*dir, *name+".pem"))
	return exitOK
}

func loadOrMakeCA(dir string) (*devtls.CA, bool, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err == nil {
		keyPEM, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
		if err != nil {
			return nil, false, err
		}
		ca, err := devtls.LoadCA(certPEM, keyPEM)
		return ca, false, err
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	ca, err := devtls.NewCA("felix development CA")
	if err == nil {
		err = writeFiles(dir, map[string][]byte{"ca.pem": ca.CertPEM, "ca-key.pem": ca.KeyPEM})
	}
	return ca, true, err
}

// writeFiles writes certificates 0644 and keys 0600 into dir (0700 if new).
func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, b := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, "-key.pem") {
			mode = 0o600
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, mode); err != nil {
			return err
		}
	}
	return nil
}
