package lint

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeBenchFacts is a small tree for the checker's own cases.
func fakeBenchFacts() *benchFacts {
	return &benchFacts{
		makefile:    "bench-codec:\n\tscripts/bench-go.sh 5 wire '64x4K$$' 2s\nrun:\n\tgo run ./cmd/felix-broker\n",
		makeTargets: map[string]bool{"bench-codec": true, "run": true},
		scripts: map[string]*benchScript{
			"scripts/bench-go.sh":       {text: "${BENCH_COMMITS:-}", executable: true, usage: []string{"ROUNDS", "PACKAGE", "PATTERN", "[BENCHTIME]"}},
			"scripts/bench-delivery.sh": {text: "${SCENARIOS:-all}", executable: true, usage: []string{"[ROUNDS]"}},
			"scripts/cluster.sh":        {executable: true},
			"scripts/plain.sh":          {},
		},
		pkgs: map[string]*benchPkg{
			"wire":   {benchmarks: []string{"BenchmarkEncodePublishBatch64x4K"}, env: map[string]bool{}},
			"broker": {benchmarks: []string{"BenchmarkThroughput4KiBx64"}, env: map[string]bool{"FELIX_BENCH_NO_TRACE": true}},
		},
		goDirs:       map[string]bool{"tools/loadgen": true, "wire": true, "broker": true},
		knobs:        map[string]bool{"FELIX_DATA_DIR": true},
		loadgenFlags: map[string]bool{"profile": true, "payload": true, "subscribers": true},
		matrixCells:  []string{"lat-p$p-f$f", "slow-10", "watch-w1"},
	}
}

// TestBenchmarksDocCheckCatches shows each rule of
// TestBenchmarksDocCommandsRun failing on a page that breaks it, and a
// page that keeps them all passing.
func TestBenchmarksDocCheckCatches(t *testing.T) {
	const table = "| figure | command |\n|---|---|\n"
	for _, tc := range []struct {
		name, doc, want string // want "": no error
	}{
		{"a page that keeps every rule", "## Codec (`make bench-codec`)\n\n" +
			"`make bench-<area>` runs an area; `scripts/cluster.sh` starts a cluster.\n\n" + table +
			"| a | `scripts/bench-go.sh 5 wire 'PublishBatch64x4K$' 2s` |\n" +
			"| b | same |\n" +
			"| c | `FELIX_DATA_DIR=out/data make run`, then `go run ./tools/loadgen --profile latency` (and `--subscribers 500`) |\n" +
			"| d | same with `--payload 0` |\n" +
			"| e | `make bench-codec` (cells `lat-p*-f*`, `slow-10` and `watch-w*`) |\n" +
			"| f | `BENCH_COMMITS='a b' scripts/bench-go.sh 5 broker '^BenchmarkThroughput4KiBx64$;FELIX_BENCH_NO_TRACE=1 ^BenchmarkThroughput4KiBx64$/^sub$' 1x` |\n" +
			"| g | `SCENARIOS=pause scripts/bench-delivery.sh 3` |\n", ""},
		{"a scratch path", "raw output in /tmp/felix-bench.x\n", "/tmp path"},
		{"a session heading", "## Rerun, session 4\n", "reads as a diary"},
		{"a missing make target", "`make bench-nope`\n", `no make target "bench-nope"`},
		{"a missing script", "`scripts/nope.sh 3`\n", "no script scripts/nope.sh"},
		{"a script that does not run", "`scripts/plain.sh`\n", "is not executable"},
		{"too many arguments", "`scripts/bench-delivery.sh 3 4`\n", "takes [ROUNDS]"},
		{"rounds that are not a count", "`scripts/bench-delivery.sh many`\n", `ROUNDS] is "many", not a count`},
		{"a pattern matching no benchmark", "`scripts/bench-go.sh 5 wire 'Decode$'`\n", "matches no benchmark of wire"},
		{"a later case matching none", "`scripts/bench-go.sh 5 wire '64x4K$;JSON'`\n", `"JSON" matches no benchmark`},
		{"a package without benchmarks", "`scripts/bench-go.sh 5 nope 'X'`\n", "no package with tests at nope"},
		{"a bad benchtime", "`scripts/bench-go.sh 5 wire 'Publish' 2q`\n", "BENCHTIME"},
		{"a bench variable the package ignores", "`scripts/bench-go.sh 5 wire 'FELIX_BENCH_NO_TRACE=1 Publish'`\n", "do not read it"},
		{"an unregistered knob", "`FELIX_NOPE=1 make run`\n", "FELIX_NOPE is not a registered knob"},
		{"a variable the script ignores", "`ROUNDS_X=1 scripts/bench-delivery.sh`\n", "does not read ROUNDS_X"},
		{"a loadgen flag that does not exist", "`go run ./tools/loadgen --nope 1`\n", "no flag --nope"},
		{"go run of nothing", "`go run ./tools/nope`\n", "no package tools/nope"},
		{"same in the first row", table + "| a | same |\n", "with no command above it"},
		{"a tool a checkout does not have", table + "| a | `felix-loadgen --payload 0` |\n", "go run ./tools/loadgen"},
		{"a row that runs nothing", table + "| a | see \"The floor\" |\n", "runs nothing"},
		{"flags for no load generator", table + "| a | `make run` (and `--payload 0`) |\n", "belong to no felix-loadgen command"},
		{"a matrix cell that does not exist", table + "| a | `make bench-codec` (cell `nope-*`) |\n", `no cell "nope-*"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &benchDocCheck{f: fakeBenchFacts(), file: "doc"}
			c.doc(tc.doc)
			if tc.want == "" {
				require.Empty(t, c.errs)
				return
			}
			require.NotEmpty(t, c.errs)
			require.Contains(t, strings.Join(c.errs, "\n"), tc.want)
		})
	}
}

func TestSplitBenchPattern(t *testing.T) {
	require.Equal(t, []string{"^BenchmarkA$", "^x=[0/9]$", "(a/b)"}, splitBenchPattern(`^BenchmarkA$/^x=[0/9]$/(a/b)`))
	require.Equal(t, []string{`a\/b`}, splitBenchPattern(`a\/b`))
}

func TestShellWords(t *testing.T) {
	require.Equal(t, []string{"A=b c", "x", "'^y$;z'", ""}, shellWords(`A='b c' x "'^y$;z'" ''`))
}
