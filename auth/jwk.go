package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
)

// jwkProbe reads the members of a JWK we decide on before go-jose parses the
// key material.
type jwkProbe struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	// Private or symmetric material: its presence disqualifies the key.
	D  json.RawMessage `json:"d"`
	P  json.RawMessage `json:"p"`
	Q  json.RawMessage `json:"q"`
	DP json.RawMessage `json:"dp"`
	DQ json.RawMessage `json:"dq"`
	QI json.RawMessage `json:"qi"`
	K  json.RawMessage `json:"k"`
}

// ParseJWKS parses a JSON Web Key Set into verification keys by kid. Keys
// this package cannot or must not use are skipped, each with a reason, as RFC
// 7517 section 5 asks; a set with no usable key is an error, since it can
// verify nothing. A key without alg is accepted and bound by its type
// (algorithmFits): the published Felix rejected those and so could not use
// Microsoft Entra ID.
func ParseJWKS(body []byte) (keys map[string]Key, skipped []string, err error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, nil, fmt.Errorf("not a JWK Set: %v", err)
	}
	if set.Keys == nil {
		return nil, nil, errors.New(`not a JWK Set: no "keys" array`)
	}
	keys = make(map[string]Key, len(set.Keys))
	for i, raw := range set.Keys {
		k, why := parseJWK(raw)
		if why == "" {
			if _, dup := keys[k.ID]; dup {
				// Two keys under one kid make "the key named by kid"
				// ambiguous; use neither.
				delete(keys, k.ID)
				why = fmt.Sprintf("kid %q appears more than once", k.ID)
			} else {
				keys[k.ID] = k
				continue
			}
		}
		skipped = append(skipped, fmt.Sprintf("key %d: %s", i, why))
	}
	if len(keys) == 0 {
		return nil, skipped, fmt.Errorf("JWK Set has no usable signing key (%d keys; %s)",
			len(set.Keys), strings.Join(skipped, "; "))
	}
	return keys, skipped, nil
}

// parseJWK returns the key, or why it cannot be used.
func parseJWK(raw json.RawMessage) (Key, string) {
	var p jwkProbe
	if err := json.Unmarshal(raw, &p); err != nil {
		return Key{}, fmt.Sprintf("not a JSON object: %v", err)
	}
	switch {
	case p.Kid == "":
		return Key{}, "no kid (tokens name their key by kid)"
	case p.Use != "" && p.Use != "sig":
		return Key{}, fmt.Sprintf("kid %q: use %q is not sig", p.Kid, p.Use)
	case p.Kty == "oct" || p.K != nil:
		return Key{}, fmt.Sprintf("kid %q: symmetric key in a public key set", p.Kid)
	case p.D != nil || p.P != nil || p.Q != nil || p.DP != nil || p.DQ != nil || p.QI != nil:
		return Key{}, fmt.Sprintf("kid %q: private key material in a public key set", p.Kid)
	}
	if _, ok := supportedAlgs[p.Alg]; p.Alg != "" && !ok {
		return Key{}, fmt.Sprintf("kid %q: alg %q is not supported", p.Kid, p.Alg)
	}
	// go-jose's UnmarshalJSON accepts private keys; the probe above has
	// ruled them out, which is what makes it safe here.
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return Key{}, fmt.Sprintf("kid %q (kty %q): %v", p.Kid, p.Kty, err)
	}
	k := Key{ID: p.Kid, Algorithm: p.Alg, Public: jwk.Key}
	for alg := range supportedAlgs {
		if algorithmFits(k, alg) {
			return k, ""
		}
	}
	if p.Alg != "" {
		return Key{}, fmt.Sprintf("kid %q: alg %q does not fit a %s key", p.Kid, p.Alg, keyType(k.Public))
	}
	return Key{}, fmt.Sprintf("kid %q: %s keys are not accepted (RSA >= %d bits, EC P-256, Ed25519)", p.Kid, keyType(k.Public), minRSABits)
}
