package netknobs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/knob"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoad(t *testing.T) {
	v, err := Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, Values{BlackHoleCooldown: 2 * time.Second}, v)

	v, err = Load(env(map[string]string{"FELIX_INITIAL_MTU": " 1300 ", "FELIX_CONN_STATS_MS": "500",
		"FELIX_MTU_BLACK_HOLE_COOLDOWN_MS": "100"}))
	require.NoError(t, err)
	require.Equal(t, Values{InitialMTU: 1300, ConnStatsInterval: 500 * time.Millisecond, BlackHoleCooldown: 100 * time.Millisecond}, v)

	for name, bad := range map[string]string{"FELIX_INITIAL_MTU": "1500", "FELIX_CONN_STATS_MS": "-1",
		"FELIX_MTU_BLACK_HOLE_COOLDOWN_MS": "99"} {
		_, err := Load(env(map[string]string{name: bad}))
		require.ErrorIs(t, err, knob.ErrInvalid, name)
		require.ErrorContains(t, err, name)
	}
}
