package cli

import (
	"flag"
	"fmt"
	"sort"
	"strings"
)

// Command is what shell completion knows of one subcommand.
type Command struct {
	Name string
	// Verbs are the words allowed right after Name (cache: put, get, del).
	Verbs []string
	// Flags are the flag names, without dashes.
	Flags []string
}

// FlagNames lists set's flags, for Command.Flags.
func FlagNames(set *flag.FlagSet) []string {
	var out []string
	set.VisitAll(func(fl *flag.Flag) { out = append(out, fl.Name) })
	sort.Strings(out)
	return out
}

// Bash is a bash completion script for program: subcommands, then their
// verbs, then their flags (after "-") or file names.
// Load it with `source <(program completion bash)`.
func Bash(program string, cmds []Command) string {
	fn := "_" + strings.NewReplacer("-", "_", ".", "_").Replace(program) + "_complete"
	var b strings.Builder
	fmt.Fprintf(&b, "# bash completion for %s: source <(%s completion bash)\n", program, program)
	fmt.Fprintf(&b, "%s() {\n", fn)
	b.WriteString("  local cur=\"${COMP_WORDS[COMP_CWORD]}\" opts=\"\" verbs=\"\"\n")
	fmt.Fprintf(&b, "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n    COMPREPLY=($(compgen -W %q -- \"$cur\"))\n    return\n  fi\n", names(cmds))
	b.WriteString("  case \"${COMP_WORDS[1]}\" in\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "  %s) verbs=%q; opts=%q;;\n", c.Name, strings.Join(c.Verbs, " "), dashed(c.Flags))
	}
	b.WriteString("  esac\n")
	b.WriteString("  if [ \"$COMP_CWORD\" -eq 2 ] && [ -n \"$verbs\" ]; then\n    COMPREPLY=($(compgen -W \"$verbs\" -- \"$cur\"))\n    return\n  fi\n")
	b.WriteString("  case \"$cur\" in\n  -*) COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"));;\n  *) COMPREPLY=($(compgen -f -- \"$cur\"));;\n  esac\n}\n")
	fmt.Fprintf(&b, "complete -o filenames -F %s %s\n", fn, program)
	return b.String()
}

// Zsh is a zsh completion script for program, with the same rules as Bash.
// Load it with `source <(program completion zsh)`, or save it as _program
// in a directory of $fpath.
func Zsh(program string, cmds []Command) string {
	fn := "_" + strings.NewReplacer("-", "_", ".", "_").Replace(program)
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef %s\n# zsh completion for %s: source <(%s completion zsh)\n", program, program, program)
	fmt.Fprintf(&b, "%s() {\n", fn)
	b.WriteString("  local -a verbs opts\n")
	fmt.Fprintf(&b, "  if (( CURRENT == 2 )); then\n    compadd -- %s\n    return\n  fi\n", names(cmds))
	b.WriteString("  case $words[2] in\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "  %s) verbs=(%s); opts=(%s);;\n", c.Name, strings.Join(c.Verbs, " "), dashed(c.Flags))
	}
	b.WriteString("  esac\n")
	b.WriteString("  if (( CURRENT == 3 && ${#verbs} > 0 )); then\n    compadd -- $verbs\n    return\n  fi\n")
	b.WriteString("  if [[ $PREFIX == -* ]]; then\n    compadd -- $opts\n  else\n    _files\n  fi\n}\n")
	fmt.Fprintf(&b, "if [ \"$funcstack[1]\" = %q ]; then\n  %s \"$@\"\nelse\n  compdef %s %s\nfi\n", fn, fn, fn, program)
	return b.String()
}

func names(cmds []Command) string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = c.Name
	}
	return strings.Join(out, " ")
}

func dashed(flags []string) string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = "--" + f
	}
	return strings.Join(out, " ")
}
