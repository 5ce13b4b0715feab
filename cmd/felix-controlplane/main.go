// Command felix-controlplane runs the Felix control plane configured by
// FELIX_CP_* knobs.
//
//	felix-controlplane          run it
//	felix-controlplane env      print every knob: default, current value, allowed values, doc
//	felix-controlplane env -markdown   print the README knob table
package main

import (
	"io"
	"os"
	"strings"

	"github.com/felixmq/felix/cmd/internal/command"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	return command.Run(command.Spec{
		Name: "felix-controlplane", What: "control plane", Registry: registry,
		LogLevel: knobLogLevel, LogFormat: knobLogFormat,
		AllowUnknown: knobAllowUnknown, Foreign: brokerKnob,
		Serve: serve, ErrConfig: errConfig,
	}, args, stdout, stderr)
}

// brokerKnob reports the FELIX_* names outside the control plane's own
// FELIX_CP_ namespace that it does not declare: the broker's and the
// clients', which an environment shared with them sets.
func brokerKnob(name string) bool { return !strings.HasPrefix(name, "FELIX_CP_") }
