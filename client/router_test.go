package client

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorder is an owner of event streams that records what it was given.
type recorder struct{ got []eventStream }

func (r *recorder) attach(es eventStream) { r.got = append(r.got, es) }

// Event streams are routed by the subscription id of their hello: to the
// owner registered under it, or, when the stream overtakes the reply that
// registers it, parked until the owner registers.
func TestRouterRoutesByID(t *testing.T) {
	var r router
	r.init(nil)
	a, b := &recorder{}, &recorder{}
	r.register(1, a)

	// A stream for 2 arrives before 2 is registered: parked.
	early := eventStream{}
	r.mu.pending[2] = early
	r.register(2, b)
	require.Len(t, b.got, 1, "a parked stream is attached at registration")
	require.Empty(t, r.mu.pending)
	require.Empty(t, a.got, "nothing for 1 yet")

	require.Same(t, a, r.mu.subs[1].(*recorder))
	r.forget(1)
	_, ok := r.mu.subs[1]
	require.False(t, ok)
}

// An owner that closes after its stream came unbinds its id and stops the
// stream itself; one that closes before leaves a stopper in its place, so
// the stream is refused when it comes (the broker then ends what it serves)
// instead of parking with the pending ones until the connection ends.
func TestRouterReleaseBeforeAndAfterTheStream(t *testing.T) {
	var r router
	r.init(nil)

	var attachedOnce sync.Once
	attachedOnce.Do(func() {}) // the stream came
	r.register(1, &recorder{})
	require.True(t, r.release(1, &attachedOnce), "the owner stops its own stream")
	_, ok := r.mu.subs[1]
	require.False(t, ok)

	var neverAttached sync.Once
	r.register(2, &recorder{})
	require.False(t, r.release(2, &neverAttached), "no stream yet")
	require.IsType(t, streamStopper{}, r.mu.subs[2], "a late stream is refused")
	ran := false
	neverAttached.Do(func() { ran = true })
	require.False(t, ran, "release took the owner's attach, so no stream attaches any more")
}
