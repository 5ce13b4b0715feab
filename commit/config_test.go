package commit

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConfigZeroValueIsTheDocumentedDefault: the zero Config is the
// documented default (docs/design.md, "House style"): periodic every 250 ms
// ("Semantics", durability), no coalescing delay.
func TestConfigZeroValueIsTheDocumentedDefault(t *testing.T) {
	c := Config{Syncer: &fakeLog{}}.withDefaults()
	require.Equal(t, Periodic, c.Mode)
	require.Equal(t, 250*time.Millisecond, c.Interval)
	require.Zero(t, c.MaxDelay)
	require.NotNil(t, c.Logger)
	require.NoError(t, c.validate())
}

func TestConfigValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Syncer"},
		{Config{Syncer: &fakeLog{}, Mode: Never + 1}, "Mode"},
		{Config{Syncer: &fakeLog{}, Interval: -1}, "Interval"},
		{Config{Syncer: &fakeLog{}, MaxDelay: -1}, "MaxDelay"},
	} {
		_, err := New(tc.cfg)
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.ErrorContains(t, err, tc.want)
	}
}

// TestModeParsesTheKnobSpellings proves the FELIX fsync knob values map to
// modes and back, and anything else is refused.
func TestModeParsesTheKnobSpellings(t *testing.T) {
	for _, m := range []Mode{OnCommit, Periodic, Never} {
		got, err := ParseMode(m.String())
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	for _, bad := range []string{"", "none", "ON_COMMIT", "on-commit", "always"} {
		_, err := ParseMode(bad)
		require.ErrorIs(t, err, ErrUnknownMode, "%q", bad)
	}
	var cfg struct{ Mode Mode }
	require.NoError(t, json.Unmarshal([]byte(`{"Mode":"on_commit"}`), &cfg))
	require.Equal(t, OnCommit, cfg.Mode)
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.JSONEq(t, `{"Mode":"on_commit"}`, string(b))
	require.Equal(t, "Mode(9)", Mode(9).String())
	_, err = Mode(9).MarshalText()
	require.ErrorIs(t, err, ErrUnknownMode)
}
