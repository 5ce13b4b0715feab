// Command felix-broker runs a Felix broker configured by FELIX_* knobs.
//
//	felix-broker          run the broker
//	felix-broker env      print every knob: default, current value, allowed values, doc
//	felix-broker env -markdown   print the README knob table
package main

import (
	"io"
	"os"

	"github.com/felixmq/felix/cmd/internal/command"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	return command.Run(command.Spec{
		Name: "felix-broker", What: "broker", Registry: registry,
		LogLevel: knobLogLevel, LogFormat: knobLogFormat,
		Serve: serve, ErrConfig: errConfig,
	}, args, stdout, stderr)
}
