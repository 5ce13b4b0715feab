package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/felixmq/felix/internal/testutil"
)

// timeline collects what the test's clients log, so that a long ack gap
// can be shown next to what the brokers logged at the time (explain).
type timeline struct{ testutil.LockedBuffer }

// logger is a client logger (debug level) writing into tl.
func (tl *timeline) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// explain merges, by time, the lines the clients and every run of every
// broker logged between from and to (the first max of them).
func (rc *replicatedCluster) explain(tl *timeline, from, to time.Time, max int) string {
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	add := func(who string, raw []byte) {
		for l := range strings.SplitSeq(string(raw), "\n") {
			at, ok := logTime(l)
			if ok && !at.Before(from) && !at.After(to) {
				lines = append(lines, line{at, who + ": " + l})
			}
		}
	}
	add("client", []byte(tl.String()))
	for _, cb := range rc.brokers {
		logs, _ := filepath.Glob(filepath.Join(cb.dir, "stderr-*"))
		for _, l := range logs {
			raw, _ := os.ReadFile(l)
			add(cb.id+"/"+filepath.Base(l), raw)
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	var out strings.Builder
	for i, l := range lines {
		if i == max {
			fmt.Fprintf(&out, "... %d more lines", len(lines)-max)
			break
		}
		out.WriteString(l.text + "\n")
	}
	return out.String()
}

// logTime is the time of an slog text line ("time=... level=...").
func logTime(l string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(l, "time=")
	if !ok {
		return time.Time{}, false
	}
	stamp, _, _ := strings.Cut(rest, " ")
	at, err := time.Parse(time.RFC3339Nano, stamp)
	return at, err == nil
}
