package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/felixmq/felix/internal/linux"
)

// tracefsDir is where the eBPF tracepoint probes find tracefs; a variable
// so tests can point it elsewhere.
var tracefsDir = "/sys/kernel/tracing"

// mountTracefs and euid are the system's; tests replace them.
var (
	mountTracefs = linux.MountTracefs
	euid         = os.Geteuid
)

// tracefsCommand is what mounts tracefs by hand.
func tracefsCommand() string { return "mount -t tracefs nodev " + tracefsDir }

// ensureTracefs makes tracefs available to --bpf: nothing when it is
// mounted, a mount when felixtrace runs as root, else one line with the
// command that does it.
func ensureTracefs(stderr io.Writer) {
	if _, err := os.Stat(tracefsDir + "/events"); !errors.Is(err, fs.ErrNotExist) {
		return // mounted (readable or not: the probes say what they lack)
	}
	if euid() != 0 {
		fmt.Fprintf(stderr, "felixtrace: tracefs is not mounted at %s; the probes need it: sudo %s\n", tracefsDir, tracefsCommand())
		return
	}
	if err := mountTracefs(tracefsDir); err != nil {
		fmt.Fprintf(stderr, "felixtrace: mounting tracefs at %s failed (%v); try: %s\n", tracefsDir, err, tracefsCommand())
		return
	}
	fmt.Fprintf(stderr, "felixtrace: mounted tracefs at %s for the probes\n", tracefsDir)
}
