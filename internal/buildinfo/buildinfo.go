package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Info is what the binary knows about its build.
type Info struct {
	Version   string // the main module's version, "(devel)" from a checkout
	Revision  string // the VCS revision, "unknown" when not stamped (-buildvcs=false)
	GoVersion string
}

// Read returns the running binary's Info.
func Read() Info {
	in := Info{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	if bi.Main.Version != "" {
		in.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			in.Revision = s.Value
		}
	}
	return in
}

// Collector is felix_build_info{program, version, revision, goversion} 1,
// the series dashboards join on to show what runs where.
func Collector(program string) prometheus.Collector {
	in := Read()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "felix_build_info",
		Help: "Always 1; the labels say which Felix build this process runs.",
		ConstLabels: prometheus.Labels{"program": program, "version": in.Version, "revision": in.Revision,
			"goversion": in.GoVersion},
	}, func() float64 { return 1 })
}
