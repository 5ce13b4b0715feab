// Package lint holds project rules that the compiler cannot check, as tests:
// the layering of docs/design.md ("Floors"), the ban on raw syscall imports
// outside the internal/linux shim, libraries that never read the
// environment, and a tree with no committed binaries or raw dumps.
package lint
