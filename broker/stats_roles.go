package broker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"runtime/pprof"
	"strconv"
	"strings"
)

// goroutineRoles counts the broker's goroutines by the pprof label they
// run under ("goroutine": felix-commit, felix-commit-complete,
// felix-cluster-watch, ...; "felix-io": the pinned I/O threads). Go
// multiplexes goroutines over OS threads, so only ioruntime's pinned
// threads carry a name of their own; the labels are what names the other
// roles, as the CPU profiler sees them. Unlabelled goroutines (quic-go's,
// the connection and stream handlers) are not counted.
func goroutineRoles() map[string]int {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return nil
	}
	return parseGoroutineRoles(&buf)
}

// parseGoroutineRoles reads a debug=1 goroutine profile: each stack is a
// "N @ pc..." line, followed by "# labels: {...}" when it has labels.
func parseGoroutineRoles(r *bytes.Buffer) map[string]int {
	roles := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if count, _, ok := strings.Cut(line, " @ "); ok {
			n, _ = strconv.Atoi(count)
			continue
		}
		raw, ok := strings.CutPrefix(line, "# labels: ")
		if !ok || n == 0 {
			continue
		}
		var labels map[string]string
		if json.Unmarshal([]byte(raw), &labels) != nil {
			continue
		}
		if role := labels["goroutine"]; role != "" {
			roles[role] += n
		} else if io := labels["felix-io"]; io != "" {
			roles[io] += n
		}
		n = 0
	}
	return roles
}
