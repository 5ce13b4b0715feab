package cpuprofile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseStatusReadsResidentMemory(t *testing.T) {
	m, err := parseStatus([]byte("Name:\tfelix-broker\nVmRSS:\t  62616 kB\nRssAnon:\t   42760 kB\nRssFile:\t   19856 kB\nRssShmem:\t       0 kB\n"))
	require.NoError(t, err)
	require.Equal(t, ProcessMemory{RSSAnonBytes: 42760 << 10, RSSFileBytes: 19856 << 10}, m)
	_, err = parseStatus([]byte("Name:\tx\n"))
	require.Error(t, err)
	_, err = parseStatus([]byte("RssAnon:\tlots kB\nRssFile:\t1 kB\n"))
	require.Error(t, err)
}
