package auth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// audience decodes aud, which RFC 7519 section 4.1.3 allows as a string or
// an array of strings.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	v, err := stringsClaim(b)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

func (a audience) containsAny(want []string) bool {
	for _, w := range want {
		if slices.Contains(a, w) {
			return true
		}
	}
	return false
}

// stringsClaim decodes a claim that is a string or an array of strings; an
// absent claim is an empty list.
func stringsClaim(b json.RawMessage) ([]string, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return nil, errors.New("expected a string or an array of strings")
	}
	return many, nil
}

// unverifiedClaims are read from the payload before verification, only to
// choose the keys (iss) or to reject early (tid); nothing is granted on them.
type unverifiedClaims struct {
	Issuer *string `json:"iss"`
	Tenant *string `json:"tid"`
}

func readUnverified(raw string) (unverifiedClaims, error) {
	var c unverifiedClaims
	parts := strings.SplitN(raw, ".", 3)
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return c, reject(ErrMalformed, "payload is not base64url: %v", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, reject(ErrMalformed, "payload is not a JSON object: %v", err)
	}
	return c, nil
}

// unverifiedIssuer reads iss to choose the issuer whose keys verify the token.
func unverifiedIssuer(raw string) (string, error) {
	c, err := readUnverified(raw)
	if err != nil {
		return "", err
	}
	if c.Issuer == nil || *c.Issuer == "" {
		return "", reject(ErrIssuer, "token has no iss")
	}
	return *c.Issuer, nil
}

// MarshalJSON writes a single audience as a plain string, as the published
// Felix does.
func (a audience) MarshalJSON() ([]byte, error) {
	if len(a) == 1 {
		return json.Marshal(a[0])
	}
	return json.Marshal([]string(a))
}
