// Package invariants reports whether Felix was built with costly runtime
// checks. Build with -tags invariants (make test does) to turn them on.
//
// Packages branch on the constant, so with the tag off the checks are dead
// code and the compiler removes them; the release binary pays nothing.
package invariants
