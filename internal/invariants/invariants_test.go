package invariants

import "testing"

// TestEnabledMatchesBuildTag proves the constant follows the build tag, so a
// CI run with -tags invariants really exercises the costly checks.
func TestEnabledMatchesBuildTag(t *testing.T) {
	t.Logf("invariants.Enabled = %v", Enabled)
	if Enabled != tagSet {
		t.Fatalf("Enabled = %v, want %v", Enabled, tagSet)
	}
}
