package auth

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/design.md, "Packages": auth/ must not reach the network except the JWKS
// fetcher. Only jwks.go may import the packages that dial.
func TestOnlyTheFetcherReachesTheNetwork(t *testing.T) {
	dialers := map[string]bool{"net": true, "net/http": true, "crypto/tls": true, "net/rpc": true, "net/smtp": true}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "jwks.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			require.False(t, dialers[path], "%s imports %s: only the JWKS fetcher (jwks.go) may reach the network", name, path)
		}
	}
}
