package knob

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints every knob with its default, current value, allowed values
// and doc, as `felix-broker env` shows it. v may be nil (no current values).
func (r *Registry) WriteTable(w io.Writer, v *Values) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KNOB\tDEFAULT\tCURRENT\tALLOWED\tDOC")
	for _, k := range r.knobs {
		cur := "(default)"
		if v != nil {
			if s, ok := v.Raw(k.Name); ok {
				cur = s
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Name, orDash(k.Default), cur, k.allowed, k.Doc)
	}
	return tw.Flush()
}

// Markdown returns the README knob table.
func (r *Registry) Markdown() string {
	var b strings.Builder
	b.WriteString("| Knob | Default | Allowed | Meaning |\n|---|---|---|---|\n")
	for _, k := range r.knobs {
		def := "`" + k.Default + "`"
		if k.Default == "" {
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Name, def, mdEscape(k.allowed), mdEscape(k.Doc))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
