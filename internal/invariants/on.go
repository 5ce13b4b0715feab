//go:build invariants

package invariants

// Enabled is true: the binary was built with -tags invariants.
const Enabled = true
