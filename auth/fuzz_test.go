package auth

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"github.com/stretchr/testify/require"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzNow is the fixed clock of the fuzz targets, so the seed corpus's valid
// tokens stay valid.
var fuzzNow = time.Unix(1_800_000_000, 0)

// fuzzKey is deterministic so that seeds can carry correctly signed tokens
// (Ed25519 signatures are deterministic too).
var fuzzKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

const fuzzKid = "fuzz-ed"

// memTransport serves one JWKS without a network.
type memTransport []byte

func (b memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{},
		Body: io.NopCloser(bytes.NewReader(b)), Request: r}, nil
}

type fuzzVerifiers struct {
	felix *Verifier
	idp   *IdPVerifier
}

func newFuzzVerifiers(t testing.TB) fuzzVerifiers {
	jwks := jwksJSON(jwkJSON(t, fuzzKey.Public(), fuzzKid, ""))
	src := NewMemoryKeySource()
	if err := src.SetJWKS("t1", jwks); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return fuzzNow }
	felix, err := NewVerifier(VerifierConfig{Keys: src, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFetcher(FetcherConfig{Now: now, Client: &http.Client{Transport: memTransport(jwks)}})
	if err != nil {
		t.Fatal(err)
	}
	idp, err := NewIdPVerifier(IdPConfig{Fetcher: f, Now: now, Tenants: []TenantConfig{{
		Tenant: "t1",
		Issuers: []IssuerConfig{{Issuer: "https://idp.fuzz", JWKSURL: "https://idp.fuzz/jwks",
			Audiences: []string{"felix"}, Algorithms: []string{RS256, ES256, EdDSA}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return fuzzVerifiers{felix: felix, idp: idp}
}

// FuzzVerifyToken feeds arbitrary input to both verifiers. Whatever the
// input: no panic, every rejection carries a reason code, and an accepted
// token is for t1 and unexpired. Seeds in testdata/fuzz/FuzzVerifyToken hold
// valid Felix and IdP tokens, alg none, HS256, truncations and JSON
// serialization.
func FuzzVerifyToken(f *testing.F) {
	v := newFuzzVerifiers(f)
	f.Add("")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, raw string) {
		ctx := context.Background()
		c, err := v.felix.Verify(ctx, "t1", raw)
		if err != nil {
			if Reason(err) == "" {
				t.Fatalf("Felix rejection without a reason: %v", err)
			}
		} else if c.Tenant != "t1" || fuzzNow.Add(-time.Minute).After(c.Expiry) {
			t.Fatalf("accepted a token it should not: %+v", c)
		} else {
			for _, p := range c.Perms {
				if p.Validate("t1") != nil {
					t.Fatalf("accepted invalid grant %v", p)
				}
			}
		}
		id, err := v.idp.Verify(ctx, "t1", raw)
		if err != nil {
			if Reason(err) == "" {
				t.Fatalf("IdP rejection without a reason: %v", err)
			}
		} else if id.Issuer != "https://idp.fuzz" || fuzzNow.Add(-time.Minute).After(id.Expiry) {
			t.Fatalf("accepted an IdP token it should not: %+v", id)
		}
	})
}

// FuzzParseJWKS: no panic, and every key returned can verify some algorithm.
func FuzzParseJWKS(f *testing.F) {
	f.Add([]byte(`{"keys":[]}`))
	f.Add(jwksJSON(jwkJSON(f, fuzzKey.Public(), fuzzKid, "")))
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"a","n":"AQAB","e":"AQAB"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		keys, _, err := ParseJWKS(body)
		if err != nil {
			return
		}
		for kid, k := range keys {
			fits := false
			for alg := range supportedAlgs {
				fits = fits || algorithmFits(k, alg)
			}
			if !fits || kid != k.ID {
				t.Fatalf("unusable key %q returned", kid)
			}
		}
	})
}

// The seed corpus must reach the accept path, or the fuzzer only ever
// explores rejections. This pins what each seed proves.
func TestFuzzSeedCorpus(t *testing.T) {
	v := newFuzzVerifiers(t)
	ctx := context.Background()
	want := map[string]struct{ felix, idp error }{
		"felix_valid":        {nil, ErrIssuer},
		"idp_valid":          {ErrTenant, nil},
		"felix_other_tid":    {ErrTenant, ErrIssuer},
		"alg_none":           {ErrAlgorithm, ErrAlgorithm},
		"hs256":              {ErrAlgorithm, ErrAlgorithm},
		"truncated":          {ErrSignature, ErrIssuer},
		"two_parts":          {ErrMalformed, ErrMalformed},
		"json_serialization": {ErrMalformed, ErrMalformed},
		"crit":               {ErrMalformed, ErrMalformed},
		"dup_alg_header":     {ErrMalformed, ErrIssuer},
		"float_exp":          {ErrMalformed, ErrIssuer},
		"huge_numbers":       {ErrMalformed, ErrIssuer},
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzVerifyToken", name))
			require.NoError(t, err)
			_, quoted, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
			raw, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(quoted, "string("), ")"))
			require.NoError(t, err)
			_, err = v.felix.Verify(ctx, "t1", raw)
			if w.felix == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, w.felix)
			}
			_, err = v.idp.Verify(ctx, "t1", raw)
			if w.idp == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, w.idp)
			}
		})
	}
}
