package command

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrStaleTable is READMETable's answer when the README's table differs
// from the registry's.
var ErrStaleTable = errors.New("README knob table is stale: run `make knobs-readme`")

// READMETable checks that the text between the begin and end markers of
// the README at path is table (the registry's Markdown), or, with update,
// rewrites it so. The binaries' tests call it, so the README can never
// disagree with `env`.
func READMETable(path, begin, end, table string, update bool) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	readme := string(raw)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i+len(begin) {
		return fmt.Errorf("%s lacks the markers %q and %q", path, begin, end)
	}
	if update {
		return os.WriteFile(path, []byte(readme[:i+len(begin)]+table+readme[j:]), 0o644)
	}
	if readme[i+len(begin):j] != table {
		return fmt.Errorf("%w (%s, between %q and %q)", ErrStaleTable, path, begin, end)
	}
	return nil
}
