package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestScraperURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8080":           "http://127.0.0.1:8080/debug/felix/stats",
		"http://broker:8080/":      "http://broker:8080/debug/felix/stats",
		"https://broker.example":   "https://broker.example/debug/felix/stats",
		"[::1]:8080":               "http://[::1]:8080/debug/felix/stats",
		"http://proxy/felix-admin": "http://proxy/felix-admin/debug/felix/stats",
	} {
		require.Equal(t, want, newScraper(in, time.Second).url, in)
	}
}
