package cli

import (
	"bytes"
	"errors"
	"flag"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func testSet() (*flag.FlagSet, *time.Duration, *int, *bool) {
	set := flag.NewFlagSet("t", flag.ContinueOnError)
	ttl := set.Duration("ttl", 0, "expire after `D`")
	count := set.Int("count", 1, "`N` times")
	ack := set.Bool("ack", false, "wait for acks")
	set.String("cache", "demo", "cache `C`")
	return set, ttl, count, ack
}

// Flags go anywhere among the positional arguments, with one or two
// dashes, "=" or a separate value; numbers (negative ones too) and "--"
// make positional arguments.
func TestParseTakesFlagsAnywhere(t *testing.T) {
	set, ttl, count, ack := testSet()
	pos, err := Parse(set, []string{"put", "k", "--ttl", "5s", "v", "-count=3", "--ack", "-5", "--", "--not-a-flag"})
	require.NoError(t, err)
	require.Equal(t, []string{"put", "k", "v", "-5", "--not-a-flag"}, pos)
	require.Equal(t, 5*time.Second, *ttl)
	require.Equal(t, 3, *count)
	require.True(t, *ack)
	visited := 0
	set.Visit(func(*flag.Flag) { visited++ })
	require.Equal(t, 3, visited, "Visit sees what was set")
}

// Errors name the flag, the value and what it wants, with the unit a
// duration needs; help is ErrHelp.
func TestParseErrorsSayWhatIsWanted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ttl", "5"}, `--ttl "5": want a duration with its unit, such as 5s, 250ms or 1m: 5s for seconds?`},
		{[]string{"--count", "x"}, `--count "x": want an integer`},
		{[]string{"--count"}, `--count needs a value: an integer`},
		{[]string{"--cahce", "c"}, `unknown flag --cahce (did you mean --cache?)`},
		{[]string{"--ack=maybe"}, `--ack "maybe": want true or false`},
	} {
		set, _, _, _ := testSet()
		_, err := Parse(set, tc.args)
		require.EqualError(t, err, tc.want, tc.args)
	}
	for _, h := range []string{"-h", "-help", "--help"} {
		set, _, _, _ := testSet()
		_, err := Parse(set, []string{"x", h})
		require.ErrorIs(t, err, ErrHelp)
	}
}

// --help prints the usage on stdout and exits 0; a bad argument is one line
// on stderr (never the usage twice) and exits 2.
func TestFailHelpAndUsage(t *testing.T) {
	set, _, _, _ := testSet()
	var out, errb bytes.Buffer
	require.Equal(t, ExitOK, Fail(ErrHelp, "felix t", "usage: felix t", set, &out, &errb))
	require.Contains(t, out.String(), "usage: felix t\n\nflags:\n")
	require.Contains(t, out.String(), "  --ttl D\n      expire after D\n")
	require.Contains(t, out.String(), "  --cache C\n      cache C (default demo)\n")
	require.Empty(t, errb.String())
	out.Reset()
	_, err := Parse(set, []string{"--count", "x"})
	require.Equal(t, ExitUsage, Fail(err, "felix t", "usage: felix t", set, &out, &errb))
	require.Empty(t, out.String())
	require.Equal(t, "felix t: --count \"x\": want an integer\n(felix t --help prints the usage)\n", errb.String())
}

func TestVersionLine(t *testing.T) {
	require.True(t, strings.HasPrefix(VersionLine("felix"), "felix "))
	require.Contains(t, VersionLine("felix"), "revision ")
	require.True(t, IsVersion("--version") && IsVersion("version") && !IsVersion("v"))
	require.True(t, IsHelp("help") && IsHelp("--help") && !IsHelp("hel"))
}

var completionCmds = []Command{
	{Name: "pub", Flags: []string{"ack", "addr"}},
	{Name: "cache", Verbs: []string{"put", "get", "del"}, Flags: []string{"cache", "ttl"}},
}

// The bash script completes subcommands, verbs and flags (run in a real
// bash where there is one).
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := Bash("felix-x", completionCmds)
	complete := func(words ...string) string {
		prog := script + "\nCOMP_WORDS=(" + strings.Join(words, " ") + ")\nCOMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "\n_felix_x_complete\necho \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command(bash, "--norc", "-c", prog).CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.TrimSpace(string(out))
	}
	require.Equal(t, "pub", complete("felix-x", "p"))
	require.Equal(t, "put", complete("felix-x", "cache", "pu"))
	require.Equal(t, "--ttl", complete("felix-x", "cache", "put", "--t"))
	require.Equal(t, "--ack --addr", complete("felix-x", "pub", "--a"))
}

// The zsh script is valid zsh (where zsh is installed).
func TestZshCompletionParses(t *testing.T) {
	script := Zsh("felix-x", completionCmds)
	require.Contains(t, script, "#compdef felix-x\n")
	require.Contains(t, script, "cache) verbs=(put get del); opts=(--cache --ttl);;")
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("no zsh")
	}
	out, err := exec.Command(zsh, "-n", "-c", script).CombinedOutput()
	require.NoError(t, err, string(out))
}

// FuzzParse: any argument list is parsed or refused with an error, never
// a panic; what is not a flag comes back in order; a refused list names
// a flag.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"put\x00k\x00--ttl\x005s\x00v", "--count=3\x00-5\x00--\x00--x", "--ack=maybe", "-h", "--cahce\x00c", "--count"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		set, _, _, _ := testSet()
		pos, err := Parse(set, args)
		if err != nil {
			if !errors.Is(err, ErrHelp) && !strings.Contains(err.Error(), "--") {
				t.Fatalf("error without a flag named: %v", err)
			}
			return
		}
		j := 0
		for _, p := range pos {
			for j < len(args) && args[j] != p {
				j++
			}
			if j == len(args) {
				t.Fatalf("positional %q not among the arguments in order", p)
			}
			j++
		}
	})
}
