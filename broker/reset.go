package broker

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"

	"github.com/quic-go/quic-go"
)

// statelessResetKey derives the QUIC stateless reset key (RFC 9000 section
// 10.3) from the TLS certificate's private key, so a broker restarted with
// the same certificate (after kill -9, say) answers the packets of its
// previous incarnation's connections with a stateless reset, and their
// clients learn at once that the connection is gone instead of waiting out
// the idle timeout. The derivation is one-way and domain-separated; the
// reset key is as secret as the TLS key. nil (no reset) when the config has
// no certificate with a marshalable key.
func statelessResetKey(conf *tls.Config) *quic.StatelessResetKey {
	if conf == nil || len(conf.Certificates) == 0 || conf.Certificates[0].PrivateKey == nil {
		return nil
	}
	der, err := x509.MarshalPKCS8PrivateKey(conf.Certificates[0].PrivateKey)
	if err != nil {
		return nil
	}
	h := sha256.New()
	h.Write([]byte("felix quic stateless reset key v1\x00"))
	h.Write(der)
	var k quic.StatelessResetKey
	copy(k[:], h.Sum(nil))
	return &k
}
