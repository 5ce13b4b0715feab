package auth

import (
	"context"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// BenchmarkFelixVerify is the broker's cost per auth frame with the tenant's
// keys cached: header checks, one Ed25519 verify, claim checks.
func BenchmarkFelixVerify(b *testing.B) {
	clk := newClock()
	m := newTestMinter(b, clk, "t1")
	v := newTestVerifier(b, clk, m)
	raw, _, err := m.Mint("t1", "alice", publishOrders)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, "t1", raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdPVerify is the exchange's verification cost for an RS256 IdP
// token with the JWKS warm (no fetch inside the loop).
func BenchmarkIdPVerify(b *testing.B) {
	fx := newIdPFixture(b)
	raw := signJWT(b, jose.RS256, testRSA(b, 0), "rsa1", fx.claims(nil))
	ctx := context.Background()
	if _, err := fx.v.Verify(ctx, "t1", raw); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fx.v.Verify(ctx, "t1", raw); err != nil {
			b.Fatal(err)
		}
	}
	if n := fx.srv.fetches.Load(); n != 1 {
		b.Fatalf("%d JWKS fetches, want 1", n)
	}
}

// BenchmarkMint is the exchange's signing cost.
func BenchmarkMint(b *testing.B) {
	m := newTestMinter(b, newClock(), "t1")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := m.Mint("t1", "alice", publishOrders); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExchange is the whole exchange, warm: IdP verify, role mapping,
// mint.
func BenchmarkExchange(b *testing.B) {
	fx := newIdPFixture(b)
	m := newTestMinter(b, fx.clk, "t1")
	raw := signJWT(b, jose.RS256, testRSA(b, 0), "rsa1", fx.claims(nil))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Exchange(ctx, fx.v, m, "t1", raw, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheck is the per-operation RBAC cost on the data path.
func BenchmarkCheck(b *testing.B) {
	c := &Claims{Tenant: "t1", Perms: []Permission{
		{ActionSubscribe, "t1/default/*"}, {ActionCacheRead, "t1/*/*"}, {ActionPublish, "t1/default/orders"},
	}}
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(c, ActionPublish, "stream:t1/default/orders"); err != nil {
			b.Fatal(err)
		}
	}
}
