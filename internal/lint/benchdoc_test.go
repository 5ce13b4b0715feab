package lint

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBenchmarksDocCommandsRun keeps docs/BENCHMARKS.md a reference a
// reader can reproduce from a clean checkout: every command it gives names
// a make target of the Makefile or a script of scripts/ with the arguments
// its usage line takes; every Go benchmark pattern matches a benchmark of
// the named package; every environment variable is a registered knob, a
// FELIX_BENCH_* the named package's tests read or one the script reads;
// every felix-loadgen flag and bench-matrix cell exists; every table row
// has a command (or "same" under one that has); and no scratch path or
// session diary is left. It parses sources and builds nothing. The
// Makefile's own benchmark recipes are held to the same rules.
func TestBenchmarksDocCommandsRun(t *testing.T) {
	f := loadBenchFacts(t, "../..")
	doc, err := os.ReadFile("../../docs/BENCHMARKS.md")
	require.NoError(t, err)
	c := &benchDocCheck{f: f, file: "docs/BENCHMARKS.md"}
	c.doc(string(doc))
	c.file = "Makefile"
	for i, line := range strings.Split(f.makefile, "\n") {
		if cmd, ok := strings.CutPrefix(line, "\t"); ok && strings.Contains(cmd, "scripts/bench-") {
			cmd = strings.ReplaceAll(strings.TrimPrefix(cmd, "@"), "$$", "$")
			c.names(i+1, cmd)
			c.command(i+1, cmd)
		}
	}
	for _, e := range c.errs {
		t.Error(e)
	}
}

// benchFacts is what the tree offers the commands.
type benchFacts struct {
	makefile     string
	makeTargets  map[string]bool
	scripts      map[string]*benchScript // by path, "scripts/x.sh"
	pkgs         map[string]*benchPkg    // by directory, "broker"
	goDirs       map[string]bool         // directories holding Go files
	knobs        map[string]bool         // registered FELIX_* knobs
	loadgenFlags map[string]bool
	matrixCells  []string // bench-matrix.sh's run names, $variables as written
}

type benchScript struct {
	text       string
	executable bool
	usage      []string // "ROUNDS", "[BENCHTIME]"; nil when it has no usage line
}

type benchPkg struct {
	benchmarks []string        // Benchmark functions of its _test.go files
	env        map[string]bool // FELIX_BENCH_* its _test.go files name
}

var (
	makeTargetRe  = regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+):`)
	usageRe       = regexp.MustCompile(`^# (\S+\.sh)((?: \[?[A-Z_]+\]?)*) — `)
	benchFuncRe   = regexp.MustCompile(`(?m)^func (Benchmark\w*)\(\w+ \*testing\.B\)`)
	benchEnvRe    = regexp.MustCompile(`"(FELIX_BENCH_[A-Z0-9_]+)"`)
	knobDeclRe    = regexp.MustCompile(`\b(?:registry|r)\.\w+\(\s*"(FELIX_[A-Z0-9_]+)"`)
	flagDeclRe    = regexp.MustCompile(`\.(?:Bool|Int|Int64|Uint|Uint64|String|Float64|Duration|Text|Func|BoolFunc)(?:Var)?\((?:[^,()]+,\s*)?"([a-z][a-z0-9-]*)"`)
	matrixCellRe  = regexp.MustCompile(`(?m)^\s*lg\s+"?([^"\s]+)"?`)
	knobDirs      = []string{"cmd/felix-broker", "cmd/felix-controlplane", "udp/netknobs"}
	loadgenSource = "tools/loadgen"
)

func loadBenchFacts(t *testing.T, root string) *benchFacts {
	read := func(path string) string {
		b, err := os.ReadFile(filepath.Join(root, path))
		require.NoError(t, err)
		return string(b)
	}
	f := &benchFacts{makefile: read("Makefile"), makeTargets: map[string]bool{}, scripts: map[string]*benchScript{},
		pkgs: map[string]*benchPkg{}, goDirs: map[string]bool{}, knobs: map[string]bool{}, loadgenFlags: map[string]bool{}}
	for _, name := range submatches(makeTargetRe, f.makefile) {
		f.makeTargets[name] = true
	}
	paths, err := filepath.Glob(filepath.Join(root, "scripts", "*.sh"))
	require.NoError(t, err)
	for _, p := range paths {
		info, err := os.Stat(p)
		require.NoError(t, err)
		s := &benchScript{text: read("scripts/" + filepath.Base(p)), executable: info.Mode()&0o111 != 0}
		if lines := strings.SplitN(s.text, "\n", 3); len(lines) > 1 {
			if m := usageRe.FindStringSubmatch(lines[1]); m != nil && m[1] == filepath.Base(p) {
				s.usage = append([]string{}, strings.Fields(m[2])...)
			}
		}
		f.scripts["scripts/"+filepath.Base(p)] = s
	}
	f.matrixCells = cellNames(f.scripts["scripts/bench-matrix.sh"])
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "out" || name == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		f.goDirs[dir] = true
		switch {
		case strings.HasSuffix(name, "_test.go"):
			p := f.pkgs[dir]
			if p == nil {
				p = &benchPkg{env: map[string]bool{}}
				f.pkgs[dir] = p
			}
			src := read(rel)
			p.benchmarks = append(p.benchmarks, submatches(benchFuncRe, src)...)
			for _, name := range submatches(benchEnvRe, src) {
				p.env[name] = true
			}
		case slices.Contains(knobDirs, dir):
			for _, name := range submatches(knobDeclRe, read(rel)) {
				f.knobs[name] = true
			}
		case dir == loadgenSource:
			for _, name := range submatches(flagDeclRe, read(rel)) {
				f.loadgenFlags[name] = true
			}
		}
		return nil
	}))
	require.NotEmpty(t, f.knobs, "no knob declarations found in %v", knobDirs)
	require.NotEmpty(t, f.loadgenFlags, "no flag declarations found in %s", loadgenSource)
	return f
}

func cellNames(s *benchScript) []string {
	if s == nil {
		return nil
	}
	return submatches(matrixCellRe, s.text)
}

// submatches is the first group of every match of re in s.
func submatches(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// benchDocCheck collects what is wrong, file:line first.
type benchDocCheck struct {
	f    *benchFacts
	file string
	errs []string
}

func (c *benchDocCheck) errorf(line int, format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf("%s:%d: %s", c.file, line, fmt.Sprintf(format, args...)))
}

var (
	codeSpanRe   = regexp.MustCompile("`([^`]+)`")
	felixNameRe  = regexp.MustCompile(`\bFELIX_[A-Z0-9_]+`)
	diaryRe      = regexp.MustCompile(`(?i)\b(session|rerun|final run)\b`)
	tableRuleRe  = regexp.MustCompile(`^\|[-:| ]+\|$`)
	envWordRe    = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=`)
	cellsRe      = regexp.MustCompile("\\bcells? ((?:`[^`]+`(?:, | and | or )?)+)")
	benchtimeRe  = regexp.MustCompile(`^[0-9]+x$`)
	countedArgRe = regexp.MustCompile(`^\[?[A-Z_]*(ROUNDS|RUNS)\]?$`)
	shellVarRe   = regexp.MustCompile(`\$\w+`)
	globStarRe   = regexp.MustCompile(`\*`)
)

// doc checks the whole document: its headings, paths and names, every
// command in a code span, and every table with a command column.
func (c *benchDocCheck) doc(text string) {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		n := i + 1
		if strings.HasPrefix(line, "#") && diaryRe.MatchString(line) {
			c.errorf(n, "heading %q reads as a diary: the page states today's figures", line)
		}
		if strings.Contains(line, "/tmp") {
			c.errorf(n, "a /tmp path: commands run from a clean checkout, output goes to $BENCH_OUT or out/")
		}
		c.names(n, line)
		for _, m := range codeSpanRe.FindAllStringSubmatch(line, -1) {
			c.command(n, m[1])
		}
	}
	for i := 0; i+1 < len(lines); i++ {
		if strings.HasPrefix(lines[i], "|") && tableRuleRe.MatchString(lines[i+1]) {
			i = c.table(lines, i)
		}
	}
}

// names checks every FELIX_* name of line (command checks a FELIX_BENCH_*
// that a bench-go.sh command sets against its package too).
func (c *benchDocCheck) names(n int, line string) {
	for _, name := range felixNameRe.FindAllString(line, -1) {
		c.felixName(n, name, nil)
	}
}

// table checks the rows of the table whose header is lines[head] and
// returns the index of its last line.
func (c *benchDocCheck) table(lines []string, head int) int {
	col := slices.Index(tableCells(lines[head]), "command")
	i := head + 2
	var above []string // the kinds of command the row above gives
	for ; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		if col < 0 {
			continue
		}
		n, cells := i+1, tableCells(lines[i])
		if col >= len(cells) {
			c.errorf(n, "row has no command column")
			continue
		}
		cell := cells[col]
		var kinds []string
		if strings.HasPrefix(cell, "same") {
			if above == nil {
				c.errorf(n, "%q with no command above it", cell)
			}
			kinds = slices.Clone(above)
		}
		for _, m := range codeSpanRe.FindAllStringSubmatch(cell, -1) {
			if k := commandKind(m[1]); k != "" {
				kinds = append(kinds, k)
			}
			if w := shellWords(m[1]); slices.Index(w, "felix-loadgen") == leadingEnv(w) {
				c.errorf(n, "`%s`: a clean checkout has no felix-loadgen on its PATH: go run ./tools/loadgen", m[1])
			}
		}
		if len(kinds) == 0 && !strings.HasPrefix(cell, "same") {
			c.errorf(n, "command %q runs nothing: give a make target, a script or a go run", cell)
		}
		for _, m := range codeSpanRe.FindAllStringSubmatch(cell, -1) {
			if strings.HasPrefix(m[1], "-") {
				if !slices.Contains(kinds, "loadgen") {
					c.errorf(n, "flags %q belong to no felix-loadgen command of the row", m[1])
				}
				c.loadgenFlags(n, shellWords(m[1]))
			}
		}
		if m := cellsRe.FindStringSubmatch(cell); m != nil {
			for _, s := range codeSpanRe.FindAllStringSubmatch(m[1], -1) {
				c.matrixCell(n, s[1])
			}
		}
		above = kinds
	}
	return i - 1
}

// tableCells splits a table row on the | outside code spans.
func tableCells(line string) []string {
	var cells []string
	var cur strings.Builder
	code := false
	for _, r := range strings.TrimSpace(line) {
		switch {
		case r == '`':
			code = !code
		case r == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	cells = append(cells, strings.TrimSpace(cur.String()))
	if len(cells) >= 2 {
		cells = cells[1 : len(cells)-1] // before the first and after the last |
	}
	return cells
}

// commandKind says what a code span runs: "make", "script", "loadgen",
// "go", or "" when it is not a command.
func commandKind(span string) string {
	w := shellWords(span)
	env := leadingEnv(w)
	if env == len(w) {
		return ""
	}
	switch first := w[env]; {
	case first == "make":
		return "make"
	case strings.HasPrefix(first, "scripts/"):
		return "script"
	case first == "felix-loadgen", first == "go" && len(w) > env+2 && w[env+1] == "run" && strings.TrimPrefix(w[env+2], "./") == loadgenSource:
		return "loadgen"
	case first == "go" && len(w) > env+2 && w[env+1] == "run":
		return "go"
	}
	return ""
}

// command checks one code span if it is a command.
func (c *benchDocCheck) command(n int, span string) {
	kind := commandKind(span)
	if kind == "" {
		return
	}
	w := shellWords(span)
	env := leadingEnv(w)
	args := w[env+1:]
	var script *benchScript
	var pkg *benchPkg
	switch kind {
	case "make":
		for _, a := range args {
			placeholder := strings.Contains(a, "<")
			if !strings.HasPrefix(a, "-") && !envWordRe.MatchString(a) && !placeholder && !c.f.makeTargets[a] {
				c.errorf(n, "`%s`: no make target %q in the Makefile", span, a)
			}
		}
	case "script":
		script = c.script(n, span, w[env], args)
		if w[env] == "scripts/bench-go.sh" && len(args) >= 3 {
			pkg = c.goBench(n, span, args)
		}
	case "loadgen":
		if w[env] == "go" {
			args = args[2:]
		}
		c.loadgenFlags(n, args)
	case "go":
		if dir := strings.TrimPrefix(w[env+2], "./"); !c.f.goDirs[dir] {
			c.errorf(n, "`%s`: no package %s", span, dir)
		}
	}
	for _, word := range w[:env] {
		name := envWordRe.FindStringSubmatch(word)[1]
		switch {
		case strings.HasPrefix(name, "FELIX_"):
			if pkg != nil && strings.HasPrefix(name, "FELIX_BENCH_") {
				c.felixName(n, name, pkg)
			} // the rest: names() saw the line
		case script != nil && !strings.Contains(script.text, "$"+name) && !strings.Contains(script.text, "${"+name):
			c.errorf(n, "`%s`: %s does not read %s", span, w[env], name)
		case kind == "make" && !strings.Contains(c.f.makefile, name):
			c.errorf(n, "`%s`: the Makefile does not use %s", span, name)
		}
	}
}

// felixName checks a FELIX_* name: a registered knob, or a FELIX_BENCH_*
// that pkg's tests read (any package's, when pkg is nil).
func (c *benchDocCheck) felixName(n int, name string, pkg *benchPkg) {
	if !strings.HasPrefix(name, "FELIX_BENCH_") {
		if !c.f.knobs[name] {
			c.errorf(n, "%s is not a registered knob", name)
		}
		return
	}
	if pkg != nil {
		if !pkg.env[name] {
			c.errorf(n, "%s: the benchmarks of the package named do not read it", name)
		}
		return
	}
	for _, p := range c.f.pkgs {
		if p.env[name] {
			return
		}
	}
	c.errorf(n, "%s: no test reads it", name)
}

// script checks that path exists, runs, and takes args.
func (c *benchDocCheck) script(n int, span, path string, args []string) *benchScript {
	s := c.f.scripts[path]
	switch {
	case s == nil:
		c.errorf(n, "`%s`: no script %s", span, path)
		return nil
	case !s.executable:
		c.errorf(n, "`%s`: %s is not executable", span, path)
	}
	if s.usage == nil {
		return s
	}
	required := 0
	for _, u := range s.usage {
		if !strings.HasPrefix(u, "[") {
			required++
		}
	}
	if len(args) < required || len(args) > len(s.usage) {
		c.errorf(n, "`%s`: %s takes %s", span, path, strings.Join(s.usage, " "))
		return s
	}
	for i, a := range args {
		if countedArgRe.MatchString(s.usage[i]) {
			if v, err := strconv.Atoi(a); err != nil || v < 1 {
				c.errorf(n, "`%s`: %s is %q, not a count", span, s.usage[i], a)
			}
		}
	}
	return s
}

// goBench checks bench-go.sh's PACKAGE PATTERN [BENCHTIME]: each of the
// ';'-separated cases, after its VAR=VALUE words, must select a benchmark.
func (c *benchDocCheck) goBench(n int, span string, args []string) *benchPkg {
	dir := strings.TrimSuffix(strings.TrimPrefix(args[1], "./"), "/")
	pkg := c.f.pkgs[dir]
	if pkg == nil {
		c.errorf(n, "`%s`: no package with tests at %s", span, dir)
		return nil
	}
	for _, cs := range strings.Split(args[2], ";") {
		w := strings.Fields(cs)
		env := leadingEnv(w)
		for _, word := range w[:env] {
			if name := envWordRe.FindStringSubmatch(word)[1]; strings.HasPrefix(name, "FELIX_BENCH_") {
				c.felixName(n, name, pkg) // names() saw the others
			}
		}
		levels := splitBenchPattern(strings.Join(w[env:], " "))
		var top *regexp.Regexp
		for i, l := range levels {
			re, err := regexp.Compile(l)
			if err != nil {
				c.errorf(n, "`%s`: pattern %q: %v", span, l, err)
				return pkg
			}
			if i == 0 {
				top = re
			}
		}
		if !slices.ContainsFunc(pkg.benchmarks, top.MatchString) {
			c.errorf(n, "`%s`: %q matches no benchmark of %s (it has %s)", span, levels[0], dir, strings.Join(pkg.benchmarks, ", "))
		}
	}
	if len(args) == 4 && !benchtimeRe.MatchString(args[3]) {
		if _, err := time.ParseDuration(args[3]); err != nil {
			c.errorf(n, "`%s`: BENCHTIME %q is neither Nx nor a duration", span, args[3])
		}
	}
	return pkg
}

// splitBenchPattern splits a -bench pattern into its per-level parts as
// go test does: at each / outside brackets and parentheses.
func splitBenchPattern(p string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '/':
			if depth == 0 {
				parts = append(parts, p[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, p[start:])
}

func (c *benchDocCheck) loadgenFlags(n int, words []string) {
	for _, w := range words {
		if !strings.HasPrefix(w, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if !c.f.loadgenFlags[name] {
			c.errorf(n, "felix-loadgen has no flag --%s", name)
		}
	}
}

// matrixCell checks that glob names a run of bench-matrix.sh, whose names
// may hold $variables: either side's wildcard part may match the other.
func (c *benchDocCheck) matrixCell(n int, glob string) {
	wild := func(s string, re *regexp.Regexp) *regexp.Regexp {
		parts := re.Split(s, -1)
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		return regexp.MustCompile("^" + strings.Join(parts, ".+") + "$")
	}
	sample := strings.ReplaceAll(glob, "*", "0")
	for _, name := range c.f.matrixCells {
		if wild(name, shellVarRe).MatchString(sample) || wild(glob, globStarRe).MatchString(shellVarRe.ReplaceAllString(name, "0")) {
			return
		}
	}
	c.errorf(n, "scripts/bench-matrix.sh has no cell %q", glob)
}

// leadingEnv is how many VAR=VALUE words start w.
func leadingEnv(w []string) int {
	i := 0
	for i < len(w) && envWordRe.MatchString(w[i]) {
		i++
	}
	return i
}

// shellWords splits s as sh would for the commands the page gives: on
// blanks outside single and double quotes, quotes removed.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}
