package netaddr

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:5000":   true,
		"127.1.2.3:0":      true,
		"[::1]:8080":       true,
		"localhost:1":      true,
		"0.0.0.0:5000":     false,
		"[::]:5000":        false,
		":5000":            false,
		"10.0.0.1:5000":    false,
		"example.com:5000": false,
		"127.0.0.1":        false, // no port: not a listen address
		"":                 false,
	} {
		require.Equal(t, want, Loopback(addr), addr)
	}
}
