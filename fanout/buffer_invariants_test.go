//go:build invariants

package fanout

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// These tests prove the use-after-release checks that the invariants build
// tag turns on; without the tag released structs are reused and detection
// is best effort, so they only run with it.

func TestInvariantsReleaseBelowZeroPanics(t *testing.T) {
	p := newTestPool(t)
	b := p.Get(1)
	b.Release()
	require.PanicsWithValue(t, "fanout: buffer released too many times", b.Release)
}

func TestInvariantsRetainAfterReleasePanics(t *testing.T) {
	p := newTestPool(t)
	b := p.Get(1)
	b.Release()
	require.PanicsWithValue(t, "fanout: buffer retained after release", b.Retain)
}

func TestInvariantsBytesAfterReleasePanics(t *testing.T) {
	p := newTestPool(t)
	b := p.Get(1)
	b.Release()
	require.PanicsWithValue(t, "fanout: buffer used after release", func() { _ = b.Bytes() })
}

// TestInvariantsReleasedBytesArePoisoned proves a reader holding a stale
// slice sees 0xde garbage rather than plausible data.
func TestInvariantsReleasedBytesArePoisoned(t *testing.T) {
	p := newTestPool(t)
	b := p.Get(1)
	b.B = append(b.B, "event payload"...)
	stale := b.B[:cap(b.B)]
	b.Release()
	for i, x := range stale {
		require.Equal(t, byte(poisonByte), x, "byte %d", i)
	}
}

// TestInvariantsWriteAfterReleasePanicsOnReuse proves a write through a
// stale slice is caught when the pool hands that memory out again. The
// pool is private to this test, so a corrupted buffer cannot leak into
// another test. sync.Pool may drop a Put (a quarter of them under -race), so
// the test corrupts a fresh buffer each round and holds every clean buffer
// it gets back, leaving the pool nothing to return but corrupted ones.
func TestInvariantsWriteAfterReleasePanicsOnReuse(t *testing.T) {
	p := newTestPool(t)
	var held []*Buffer
	defer func() { ReleaseAll(held) }()
	for round := range 200 {
		b, recovered := tryGet(p)
		if recovered != nil {
			require.Equal(t, "fanout: buffer written after release", recovered)
			return
		}
		if round%2 == 1 {
			held = append(held, b)
			continue
		}
		stale := b.B[:cap(b.B)]
		b.Release()
		stale[7] = 1
	}
	t.Fatal("write after release never detected")
}

func tryGet(p *Pool) (b *Buffer, recovered any) {
	defer func() { recovered = recover() }()
	return p.Get(1), nil
}
