package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// drain collects every batch as strings.
func drain(t *testing.T, next batches) [][]string {
	t.Helper()
	var out [][]string
	for {
		batch, err := next()
		require.NoError(t, err)
		if batch == nil {
			return out
		}
		var b []string
		for _, p := range batch {
			b = append(b, string(p))
		}
		out = append(out, b)
	}
}

func TestRepeatedBatches(t *testing.T) {
	require.Equal(t, [][]string{{"m", "m"}, {"m", "m"}, {"m"}}, drain(t, repeated([]byte("m"), 5, 2)))
	require.Equal(t, [][]string{{"m"}}, drain(t, repeated([]byte("m"), 1, 256)))
}

func TestLinesBatches(t *testing.T) {
	in := "a\r\nb\n\nc" // CRLF, an empty line (an empty message), no final newline
	require.Equal(t, [][]string{{"a", "b"}, {"", "c"}}, drain(t, lines(strings.NewReader(in), 2)))
	require.Nil(t, drain(t, lines(strings.NewReader(""), 2)))
}
