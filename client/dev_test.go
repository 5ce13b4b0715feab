package client

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Without a broker's files, DevConfig says what is missing.
func TestDevConfigWithoutABroker(t *testing.T) {
	_, _, err := DevConfig(t.TempDir())
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "is make run running?")
}
