// Package lint holds project rules that the compiler cannot check, as tests:
// the layering of docs/design.md ("Floors"), the ban on raw syscall imports
// outside the internal/linux shim, libraries that never read the
// environment, a tree with no committed binaries or raw dumps, and a
// docs/BENCHMARKS.md whose every command runs from a clean checkout.
package lint
