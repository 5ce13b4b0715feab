// Package devtls makes the self-signed certificate a broker uses when no
// certificate is configured, and the client-side trust for it.
package devtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Cert is a generated certificate.
type Cert struct {
	TLS         tls.Certificate
	PEM         []byte // the certificate alone, for clients to trust
	Fingerprint string // SHA-256 of the DER certificate, hex
}

// SelfSigned generates an ECDSA P-256 certificate valid for hosts (IP
// addresses or DNS names) plus 127.0.0.1, ::1 and localhost.
func SelfSigned(hosts ...string) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "felix-broker (self-signed)"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range append(hosts, "127.0.0.1", "::1", "localhost") {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &Cert{
		TLS:         tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		PEM:         pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Fingerprint: hex.EncodeToString(sum[:]),
	}, nil
}

// Fingerprint returns the hex SHA-256 of a DER certificate.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// ErrNoCertificate: a PEM file held no certificate.
var ErrNoCertificate = errors.New("devtls: no certificate in PEM")

// Pool returns a certificate pool holding the certificates of pemBytes.
func Pool(pemBytes []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, ErrNoCertificate
	}
	return pool, nil
}

// PinnedConfig returns a client TLS config that accepts exactly the
// certificate with the given SHA-256 fingerprint, whatever its names.
func PinnedConfig(fingerprint string) *tls.Config {
	return &tls.Config{
		InsecureSkipVerify: true, // replaced by the pin check below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) > 0 && Fingerprint(raw[0]) == fingerprint {
				return nil
			}
			return fmt.Errorf("devtls: server certificate does not match pinned fingerprint %s", fingerprint)
		},
	}
}
