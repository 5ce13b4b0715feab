// Command felix-broker runs a Felix broker configured by FELIX_* knobs.
//
//	felix-broker          run the broker
//	felix-broker env      print every knob: default, current value, allowed values, doc
//	felix-broker env -markdown   print the README knob table
//	felix-broker version  print the build
package main

import (
	"io"
	"os"
	"slices"
	"strings"

	"github.com/felixmq/felix/cmd/internal/command"
	"github.com/felixmq/felix/internal/endpoint"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	return command.Run(command.Spec{
		Name: "felix-broker", What: "broker", Registry: registry,
		LogLevel: knobLogLevel, LogFormat: knobLogFormat,
		AllowUnknown: knobAllowUnknown, Foreign: controlPlaneKnob,
		Serve: serve, ErrConfig: errConfig,
	}, args, stdout, stderr)
}

// controlPlaneKnob reports the knobs of felix-controlplane and the
// variables of the tools (FELIX_ADDR, FELIX_TOKEN, ...), which an
// environment shared with them sets.
func controlPlaneKnob(name string) bool {
	return strings.HasPrefix(name, "FELIX_CP_") || name == "FELIX_TOKEN_TTL_S" || slices.Contains(endpoint.Vars, name)
}
