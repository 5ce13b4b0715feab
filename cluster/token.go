package cluster

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// RenewableToken reports whether tok is a JWT with sub and exp, the kind
// of node credential an Agent with RenewToken renews.
func RenewableToken(tok string) bool {
	_, _, ok := tokenClaims(tok)
	return ok
}

// tokenClaims reads a JWT's sub and exp without verifying anything (the
// control plane verifies; the Agent only needs to know when to renew and
// for whom). ok is false if tok is not a JWT with both.
func tokenClaims(tok string) (sub string, exp time.Time, ok bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", time.Time{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", time.Time{}, false
	}
	var c struct {
		Subject string `json:"sub"`
		Expiry  int64  `json:"exp"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Subject == "" || c.Expiry == 0 {
		return "", time.Time{}, false
	}
	return c.Subject, time.Unix(c.Expiry, 0), true
}

// NodeTokenRequest is the body of POST /v1/token/node.
type NodeTokenRequest struct {
	Subject string `json:"subject"`
}

// NodeTokenResponse answers POST /v1/token/node.
type NodeTokenResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}
