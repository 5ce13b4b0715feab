//go:build !invariants

package invariants

const tagSet = false
