package cpuprofile

import (
	"bytes"
	"fmt"
	"strconv"
)

// ProcessMemory is a process's resident memory, split the way a broker's
// operator needs it: anonymous memory (heap, stacks: what the process
// holds) and file-backed pages (mapped segment files: page cache the
// kernel can reclaim). Scrapers of the broker's stats read it beside the
// CPU account.
type ProcessMemory struct {
	RSSAnonBytes uint64 `json:"rss_anon_bytes"`
	RSSFileBytes uint64 `json:"rss_file_bytes"`
}

// parseStatus reads RssAnon and RssFile (kB) from /proc/PID/status.
func parseStatus(b []byte) (ProcessMemory, error) {
	var m ProcessMemory
	found := 0
	for line := range bytes.Lines(b) {
		name, v, ok := bytes.Cut(line, []byte(":"))
		var dst *uint64
		switch {
		case !ok:
			continue
		case string(name) == "RssAnon":
			dst = &m.RSSAnonBytes
		case string(name) == "RssFile":
			dst = &m.RSSFileBytes
		default:
			continue
		}
		kb, err := strconv.ParseUint(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
		if err != nil {
			return m, fmt.Errorf("cpuprofile: status %s: %w", name, err)
		}
		*dst = kb << 10
		found++
	}
	if found != 2 {
		return m, fmt.Errorf("cpuprofile: status has no RssAnon and RssFile")
	}
	return m, nil
}
