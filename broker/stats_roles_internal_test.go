package broker

import (
	"context"
	"runtime/pprof"
	"testing"

	"github.com/stretchr/testify/require"
)

// /debug/felix/stats names the broker's goroutines by the pprof label
// they run under: the roles Go's threads cannot be named after.
func TestGoroutineRolesCountLabelledGoroutines(t *testing.T) {
	stop := make(chan struct{})
	started := make(chan struct{}, 3)
	for range 3 {
		go pprof.Do(context.Background(), pprof.Labels("goroutine", "felix-test-role"), func(context.Context) {
			started <- struct{}{}
			<-stop
		})
	}
	for range 3 {
		<-started
	}
	defer close(stop)
	require.Equal(t, 3, goroutineRoles()["felix-test-role"])
}
