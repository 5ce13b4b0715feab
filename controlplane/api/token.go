package api

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/felixmq/felix/auth"
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

// ExchangeRequest is the body of POST /v1/token/exchange.
type ExchangeRequest struct {
	Tenant   string `json:"tenant"`
	IdPToken string `json:"idp_token"`
	// Actions optionally narrows the minted permissions (never widens).
	Actions []auth.Action `json:"actions,omitempty"`
}

// ExchangeResponse is the answer: a Felix token and its expiry.
type ExchangeResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// RotateResponse is the answer to a key rotation.
type RotateResponse struct {
	Tenant string `json:"tenant"`
	KeyID  string `json:"kid"`
}

// NodeTokenRequest is the body of POST /v1/token/node.
type NodeTokenRequest struct {
	// Subject names the broker the credential is for (the token's sub).
	Subject string `json:"subject"`
}

// NodeTokenResponse answers POST /v1/token/node.
type NodeTokenResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// MintRequest is the body of POST /v1/token/mint, the development issuer:
// a Felix token of Tenant for Subject granting exactly Permissions, with
// no identity provider involved.
type MintRequest struct {
	Tenant      string            `json:"tenant"`
	Subject     string            `json:"subject"`
	Permissions []auth.Permission `json:"permissions"`
}
