package lint

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// outside matches what points a reader outside the repository: the design
// and style notes this project was started from, their reference folder,
// and issue numbers of a tracker that is not in the repository. The
// pattern is split so that this file does not match itself.
var outside = regexp.MustCompile(`(` + `DESIGN` + `|STYLE)\.md|\.\./shared|\bre` + `ference/|felix-` + `upstream|[Ii]ssue [0-9]`)

// TestCommentsPointInsideTheRepository: code points at docs/design.md (or
// another document in the repository) or stands alone.
func TestCommentsPointInsideTheRepository(t *testing.T) {
	cmd := exec.Command("go", "list", "-f",
		`{{$.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .TestGoFiles}} {{.}}{{end}}{{range .XTestGoFiles}} {{.}}{{end}}`,
		"./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, name := range fields[1:] {
			path := fields[0] + "/" + name
			src, err := os.ReadFile(path)
			require.NoError(t, err)
			for i, l := range strings.Split(string(src), "\n") {
				if m := outside.FindString(l); m != "" {
					t.Errorf("%s:%d points outside the repository (%q): point at docs/design.md or say it here", path, i+1, m)
				}
			}
		}
	}
}
