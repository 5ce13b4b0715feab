// Package lint holds project rules that the compiler cannot check, as tests:
// the layering of DESIGN.md section 1 and the ban on raw syscall imports
// outside the internal/linux shim.
package lint
