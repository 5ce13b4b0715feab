package main

import (
	"time"

	"github.com/felixmq/felix/internal/knob"
)

// registry declares every FELIX_* knob the broker reads. Each is declared
// once here; `felix-broker env` and the README table are generated from it.
var registry = knob.New()

var (
	knobQUICBind = registry.HostPort("FELIX_QUIC_BIND", "127.0.0.1:5000",
		"UDP address of the QUIC listener")
	knobAdminBind = registry.HostPort("FELIX_ADMIN_BIND", "127.0.0.1:8080",
		"TCP address of the admin HTTP server (/live, /ready, /metrics, /debug)")
	knobMaxFrameBytes = registry.Bytes("FELIX_MAX_FRAME_BYTES", 16<<20, 1<<10, 1<<30,
		"largest wire frame accepted; checked from the header before any allocation")
	knobShutdownDrain = registry.Duration("FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS", 25000, 0, 600000, time.Millisecond,
		"budget for draining open work on SIGTERM/SIGINT before connections are closed")
	knobLogLevel = registry.Enum("FELIX_LOG_LEVEL", "info", []string{"debug", "info", "warn", "error"},
		"minimum level of log lines")
	knobLogFormat = registry.Enum("FELIX_LOG_FORMAT", "text", []string{"text", "json"},
		"log line format on stderr")
)
