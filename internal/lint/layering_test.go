package lint

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/felixmq/felix"

// floors is docs/design.md, "Floors": a package imports only from floors below its
// own, never a neighbour on its own floor, never a floor above.
var floors = map[string]float64{
	"ioruntime":    0,
	"udp":          1,
	"wire":         2,
	"fanout":       2,
	"segment":      2,
	"commit":       2,
	"auth":         2,
	"cluster":      2, // members, shards, placement: the model brokers share
	"cpuprofile":   2,
	"replica":      2.5, // a shard's raft group over its segment log
	"broker":       3,
	"controlplane": 3,
	"client":       3,
	"cmd":          4,
	"tools":        4,
	"deploy":       4, // tests of the deployment artefacts only
}

// internalFloors places shared plumbing under internal/. By default it sits
// below everything (it may import nothing of the project outside internal/);
// the few pieces that serve one floor and need a lower one are listed.
var internalFloors = map[string]float64{
	"frameio": 2.5, // reads wire frames for broker and client
}

const internalFloor = -1

// subFloors places the subpackages that sit below their top directory's
// floor. The control plane's API package is imported by its clients (the
// client SDK, the binaries), which must not link the server or its stores.
var subFloors = map[string]float64{
	"controlplane/api": 2.5,
}

// forbidden lists external imports a layer must never reach, directly or not.
var forbidden = map[string][]string{
	// The control plane's clients link neither its server nor etcd.
	"controlplane/api": {"go.etcd.io/etcd"},
	"client":           {"go.etcd.io/etcd"},
	"tools":            {"go.etcd.io/etcd"},
	"ioruntime":        {"github.com/quic-go/quic-go"},
	"fanout":           {"github.com/quic-go/quic-go"},
	"wire":             {"github.com/quic-go/quic-go"},
	"replica":          {"github.com/quic-go/quic-go"},
	"segment":          {"github.com/quic-go/quic-go"},
	"commit":           {"github.com/quic-go/quic-go"},
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T, env ...string) []pkg {
	cmd := exec.Command("go", "list", "-e", "-deps=false", "-json", "./...")
	cmd.Dir = "../.."
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.Output()
	require.NoError(t, err)
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

// layer returns the top-level directory of a project package and its floor.
func layer(t *testing.T, path string) (string, float64, bool) {
	rel, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return "", 0, false
	}
	for sub, f := range subFloors {
		if rel == sub || strings.HasPrefix(rel, sub+"/") {
			return sub, f, true
		}
	}
	top, rest, _ := strings.Cut(rel, "/")
	if top == "internal" {
		name, _, _ := strings.Cut(rest, "/")
		if f, ok := internalFloors[name]; ok {
			return "internal/" + name, f, true
		}
		return "internal/" + name, internalFloor, true
	}
	f, known := floors[top]
	if !known {
		t.Errorf("package %s is in top-level directory %q that docs/design.md section 1 (Floors) does not place; add it there and to floors", path, top)
	}
	return top, f, true
}

func TestLayeringArrowsPointDown(t *testing.T) {
	for _, goos := range []string{"linux", "darwin", "windows"} {
		for _, p := range listPackages(t, "GOOS="+goos) {
			top, floor, _ := layer(t, p.ImportPath)
			for _, imp := range p.Imports {
				itop, ifloor, ours := layer(t, imp)
				if !ours || itop == top || floor == internalFloor && ifloor == internalFloor {
					continue // plumbing may use plumbing
				}
				if ifloor >= floor {
					t.Errorf("%s (floor %v) imports %s (floor %v): arrows must point down (GOOS=%s)",
						p.ImportPath, floor, imp, ifloor, goos)
				}
			}
			for _, bad := range forbidden[top] {
				for _, d := range append(p.Deps, p.Imports...) {
					if d == bad || strings.HasPrefix(d, bad+"/") {
						t.Errorf("%s must not depend on %s (reaches %s)", p.ImportPath, bad, d)
					}
				}
			}
		}
	}
}

// Raw syscalls go through internal/linux so that platform code stays in one
// place with its fallbacks (docs/design.md, "House style", platform code).
func TestRawSyscallImportsOnlyInShim(t *testing.T) {
	for _, p := range listPackages(t) {
		if strings.HasPrefix(p.ImportPath, module+"/internal/linux") {
			continue
		}
		top, _, _ := layer(t, p.ImportPath)
		for _, imp := range p.Imports {
			if imp == "golang.org/x/sys/unix" || imp == "syscall" && !binaries[top] {
				t.Errorf("%s imports %s directly; use internal/linux", p.ImportPath, imp)
			}
		}
	}
}

// binaries may import syscall for the portable signal constants (SIGTERM)
// that every platform has.
var binaries = map[string]bool{"cmd": true, "tools": true}

// Library packages never read the environment: the knob registry in the
// binaries builds their Config structs (docs/design.md, "Knobs").
func TestLibrariesDoNotReadEnvironment(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .GoFiles}} {{$.Dir}}/{{.}}{{end}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		top, _, _ := layer(t, fields[0])
		if top == "cmd" || top == "tools" {
			continue
		}
		for _, file := range fields[1:] {
			src, err := os.ReadFile(file)
			require.NoError(t, err)
			for _, call := range []string{"os.Getenv(", "os.LookupEnv(", "os.Environ("} {
				if strings.Contains(string(src), call) {
					t.Errorf("%s calls %s: library packages take configuration from Config structs", file, call)
				}
			}
		}
	}
}
