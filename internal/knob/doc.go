// Package knob is the registry of FELIX_* environment knobs.
//
// Every knob is declared once, with its name, kind, default, allowed range or
// values and one line of documentation. A binary builds one Registry at start-up,
// calls Load with the process environment, and turns the typed values into the
// Config structs of the library packages; library packages never read the
// environment themselves.
//
// Load validates every declared knob and reports all bad values at once, each
// naming the knob, the value and what is allowed, so an operator fixes a
// deployment in one round instead of one knob per restart. The same declarations
// print the `felix-broker env` table and the README knob table, so the three can
// never disagree.
package knob
