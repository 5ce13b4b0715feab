// Package cli is what every Felix command line shares, so that they all
// behave the way their users' other tools do: flags before, between or
// after the positional arguments (Parse); -h, -help and --help printing the
// usage on stdout with exit status 0; a bad flag value reported once, on
// one line, saying what is wanted (a duration needs its unit); `version`
// and --version (VersionLine); shell completion scripts for bash and zsh
// (Bash, Zsh).
//
// It must not import anything of the project outside internal/, and never
// reads the environment. Stateless; all platforms.
package cli
