package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/felixmq/felix/internal/buildinfo"
)

// Exit statuses every command line uses for its own parsing.
const (
	ExitOK    = 0
	ExitUsage = 2
)

// ErrHelp is returned by Parse for -h, -help and --help.
var ErrHelp = flag.ErrHelp

// Parse sets set's flags from args and returns the positional arguments.
// Flags may come before, between or after them (`felix cache put k v --ttl
// 5s`); "--" ends the flags. A token that parses as a number is a
// positional argument (a counter's negative DELTA), never a flag. -h,
// -help and --help return ErrHelp. Errors say which flag, what was given
// and what it wants; the flag package's own output is never used.
func Parse(set *flag.FlagSet, args []string) ([]string, error) {
	set.SetOutput(io.Discard)
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !isFlag(a) {
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if name == "h" || name == "help" {
			return nil, ErrHelp
		}
		fl := set.Lookup(name)
		if fl == nil {
			return nil, fmt.Errorf("unknown flag --%s%s", name, closest(set, name))
		}
		if !hasValue {
			if isBool(fl) {
				value = "true"
			} else {
				if i+1 == len(args) {
					return nil, fmt.Errorf("--%s needs a value: %s", name, Wants(fl))
				}
				i++
				value = args[i]
			}
		}
		if err := set.Set(name, value); err != nil {
			return nil, fmt.Errorf("--%s %q: %s", name, value, describe(fl, value, err))
		}
	}
	return pos, nil
}

func isFlag(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	_, err := strconv.ParseFloat(a, 64)
	return err != nil
}

func isBool(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Wants says what a flag's value must be, from the type of its value.
func Wants(fl *flag.Flag) string {
	g, ok := fl.Value.(flag.Getter)
	if !ok {
		return "see --help"
	}
	switch g.Get().(type) {
	case time.Duration:
		return "a duration with its unit, such as 5s, 250ms or 1m"
	case int, int64:
		return "an integer"
	case uint, uint64:
		return "a non-negative integer"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	}
	return "a value"
}

// describe turns the flag package's "parse error" into what was wanted.
func describe(fl *flag.Flag, value string, err error) string {
	if _, ok := fl.Value.(flag.Getter); !ok {
		return err.Error() // a Value of ours says it itself
	}
	msg := "want " + Wants(fl)
	if strings.Contains(err.Error(), "out of range") {
		msg += " (out of range)"
	}
	if g := fl.Value.(flag.Getter).Get(); g != nil {
		if _, isDur := g.(time.Duration); isDur {
			if _, nerr := strconv.ParseFloat(value, 64); nerr == nil {
				msg += fmt.Sprintf(": %ss for seconds?", value)
			}
		}
	}
	return msg
}

// closest suggests the declared flag nearest to a mistyped name.
func closest(set *flag.FlagSet, name string) string {
	var names []string
	set.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
	if best := Closest(name, names, len(name)/3+1); best != "" {
		return " (did you mean --" + best + "?)"
	}
	return ""
}

// Closest is the candidate nearest to name by edit distance, if one is
// within maxDist: the one a mistyped name most likely meant; "" if none.
func Closest(name string, candidates []string, maxDist int) string {
	best, dist := "", maxDist
	for _, c := range candidates {
		if d := editDistance(name, c); d <= dist {
			best, dist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// PrintUsage writes text, then every flag of set (nil: none) as
// "--name VALUE  usage (default ...)".
func PrintUsage(w io.Writer, text string, set *flag.FlagSet) {
	fmt.Fprintln(w, strings.TrimRight(text, "\n"))
	if set == nil {
		return
	}
	first := true
	set.VisitAll(func(fl *flag.Flag) {
		if first {
			fmt.Fprintln(w, "\nflags:")
			first = false
		}
		arg, usage := flag.UnquoteUsage(fl)
		line := "  --" + fl.Name
		if arg != "" && !isBool(fl) {
			line += " " + arg
		}
		fmt.Fprintf(w, "%s\n      %s", line, strings.ReplaceAll(usage, "\n", "\n      "))
		if fl.DefValue != "" && fl.DefValue != "0" && fl.DefValue != "-1" && fl.DefValue != "false" && fl.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", fl.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// Fail is what a command does with Parse's error (or its own check of the
// arguments): --help prints the usage on stdout and the status is ExitOK;
// anything else is one line on stderr, "NAME: ERR", a pointer to --help,
// and ExitUsage.
func Fail(err error, name, usage string, set *flag.FlagSet, stdout, stderr io.Writer) int {
	if errors.Is(err, ErrHelp) {
		PrintUsage(stdout, usage, set)
		return ExitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n(%s --help prints the usage)\n", name, err, name)
	return ExitUsage
}

// IsHelp reports whether arg asks for help.
func IsHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "-help" || arg == "--help"
}

// IsVersion reports whether arg asks for the version.
func IsVersion(arg string) bool {
	return arg == "version" || arg == "-version" || arg == "--version"
}

// VersionLine is what `PROGRAM version` prints: the module version, the
// VCS revision and the Go toolchain and platform.
func VersionLine(program string) string {
	in := buildinfo.Read()
	return fmt.Sprintf("%s %s (revision %s, %s %s/%s)", program, in.Version, in.Revision, in.GoVersion, runtime.GOOS, runtime.GOARCH)
}
