package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A defect of the published Felix, fixed (docs/design.md, "Compatibility"):
// JWKS keys without alg are accepted, bound to the algorithms their type
// allows.
func TestParseJWKSAcceptsKeysWithoutAlgBoundByType(t *testing.T) {
	keys, skipped, err := ParseJWKS(jwksJSON(
		jwkJSON(t, &testRSA(t, 0).PublicKey, "rsa", ""),
		jwkJSON(t, &testEC(t).PublicKey, "ec", ""),
		jwkJSON(t, testEd(t).Public(), "ed", ""),
	))
	require.NoError(t, err)
	require.Empty(t, skipped)
	require.Len(t, keys, 3)
	for _, c := range []struct {
		kid  string
		fits []string
	}{
		{"rsa", []string{RS256, PS256}},
		{"ec", []string{ES256}},
		{"ed", []string{EdDSA}},
	} {
		for alg := range supportedAlgs {
			want := false
			for _, f := range c.fits {
				want = want || f == alg
			}
			require.Equal(t, want, algorithmFits(keys[c.kid], alg), "kid %s alg %s", c.kid, alg)
		}
	}
}

func TestParseJWKSDeclaredAlgRestrictsKey(t *testing.T) {
	keys, _, err := ParseJWKS(jwksJSON(jwkJSON(t, &testRSA(t, 0).PublicKey, "rsa", PS256)))
	require.NoError(t, err)
	require.True(t, algorithmFits(keys["rsa"], PS256))
	require.False(t, algorithmFits(keys["rsa"], RS256), "a key declared PS256 must not verify RS256")
}

func TestParseJWKSSkipsUnusableKeys(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	good := jwkJSON(t, &testRSA(t, 0).PublicKey, "good", "")
	cases := []struct {
		name string
		key  json.RawMessage
	}{
		{"symmetric", json.RawMessage(`{"kty":"oct","kid":"hs","k":"c2VjcmV0"}`)},
		{"private RSA", func() json.RawMessage {
			b, _ := json.Marshal(map[string]any{"kty": "RSA", "kid": "priv", "n": "AQAB", "e": "AQAB", "d": "AQAB"})
			return b
		}()},
		{"encryption key", json.RawMessage(`{"kty":"RSA","kid":"enc","use":"enc","n":"AQAB","e":"AQAB"}`)},
		{"no kid", jwkJSON(t, &testRSA(t, 1).PublicKey, "", "")},
		{"alg HS256", jwkJSON(t, &testRSA(t, 1).PublicKey, "hsalg", "HS256")},
		{"alg mismatching type", jwkJSON(t, &testRSA(t, 1).PublicKey, "mismatch", ES256)},
		{"RSA 1024", jwkJSON(t, &small.PublicKey, "small", "")},
		{"EC P-384", jwkJSON(t, &p384.PublicKey, "p384", "")},
		{"unknown kty", json.RawMessage(`{"kty":"XYZ","kid":"x"}`)},
		{"not an object", json.RawMessage(`42`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			keys, skipped, err := ParseJWKS(jwksJSON(good, c.key))
			require.NoError(t, err)
			require.Len(t, keys, 1)
			require.Contains(t, keys, "good")
			require.Len(t, skipped, 1, "the %s key must be skipped with a reason", c.name)
		})
	}
}

func TestParseJWKSDuplicateKidUsesNeither(t *testing.T) {
	keys, skipped, err := ParseJWKS(jwksJSON(
		jwkJSON(t, &testRSA(t, 0).PublicKey, "dup", ""),
		jwkJSON(t, &testRSA(t, 1).PublicKey, "dup", ""),
		jwkJSON(t, &testEC(t).PublicKey, "ec", ""),
	))
	require.NoError(t, err)
	require.NotContains(t, keys, "dup")
	require.Len(t, skipped, 1)
}

func TestParseJWKSRejectsGarbage(t *testing.T) {
	for name, body := range map[string]string{
		"html":          "<html>502 Bad Gateway</html>",
		"no keys":       `{"foo":1}`,
		"keys not list": `{"keys":{}}`,
		"empty":         ``,
		"no usable key": `{"keys":[{"kty":"oct","kid":"a","k":"c2VjcmV0"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := ParseJWKS([]byte(body))
			require.Error(t, err)
		})
	}
}
