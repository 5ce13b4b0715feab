package lint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxTrackedBytes bounds a tracked file outside testdata/: anything larger is
// a build output or a raw dump, which belongs in a release or a scratch
// directory, never in history.
const maxTrackedBytes = 1 << 20

// TestTreeHoldsNoBinariesOrDumps keeps the repository readable: no tracked
// executable (ELF executables and shared objects, Mach-O, PE, or a file with
// the executable bit that is not a #! script) and no file over
// maxTrackedBytes outside a testdata/ directory. Relocatable objects (the
// eBPF programs bpf2go builds) are not executables and may be committed.
func TestTreeHoldsNoBinariesOrDumps(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on PATH to list the tracked files")
	}
	cmd := exec.Command(git, "ls-files", "-s", "-z")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing tracked to check", err)
	}
	for _, entry := range bytes.Split(bytes.TrimRight(out, "\x00"), []byte{0}) {
		// "<mode> <object> <stage>\t<path>"
		meta, path, ok := strings.Cut(string(entry), "\t")
		require.True(t, ok, "unexpected git ls-files line %q", entry)
		mode, _, _ := strings.Cut(meta, " ")
		if mode == "120000" || mode == "160000" {
			continue // symlinks and submodules hold no content here
		}
		full := filepath.Join("../..", path)
		info, err := os.Stat(full)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet committed
		}
		require.NoError(t, err)
		if info.Size() > maxTrackedBytes && !inTestdata(path) {
			t.Errorf("%s is %d bytes: tracked files outside testdata/ stay under %d (a build output or a raw dump does not belong in the tree)",
				path, info.Size(), maxTrackedBytes)
		}
		head := readHead(t, full)
		if kind := executableKind(head); kind != "" {
			t.Errorf("%s is an executable binary (%s): build outputs are ignored, never committed", path, kind)
		} else if mode == "100755" && !bytes.HasPrefix(head, []byte("#!")) {
			t.Errorf("%s has the executable bit but is not a #! script", path)
		}
	}
}

func inTestdata(path string) bool {
	return strings.HasPrefix(path, "testdata/") || strings.Contains(path, "/testdata/")
}

func readHead(t *testing.T, path string) []byte {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	head := make([]byte, 64)
	n, err := io.ReadFull(f, head)
	if err != io.ErrUnexpectedEOF && err != io.EOF {
		require.NoError(t, err)
	}
	return head[:n]
}

// executableKind names the executable format head starts with, or "".
func executableKind(head []byte) string {
	switch {
	case len(head) >= 18 && bytes.HasPrefix(head, []byte("\x7fELF")):
		var order binary.ByteOrder = binary.LittleEndian
		if head[5] == 2 {
			order = binary.BigEndian
		}
		switch order.Uint16(head[16:18]) {
		case 2:
			return "ELF executable"
		case 3:
			return "ELF shared object or PIE"
		}
	case len(head) >= 4:
		switch binary.BigEndian.Uint32(head) {
		case 0xfeedface, 0xfeedfacf, 0xcefaedfe, 0xcffaedfe:
			return "Mach-O"
		}
		if bytes.HasPrefix(head, []byte("MZ")) && len(head) >= 64 {
			return "PE"
		}
	}
	return ""
}

func TestExecutableKind(t *testing.T) {
	elf := func(class, data byte, typ uint16) []byte {
		h := make([]byte, 64)
		copy(h, "\x7fELF")
		h[4], h[5] = class, data
		if data == 2 {
			binary.BigEndian.PutUint16(h[16:], typ)
		} else {
			binary.LittleEndian.PutUint16(h[16:], typ)
		}
		return h
	}
	for _, tc := range []struct {
		name string
		head []byte
		want bool
	}{
		{"elf executable", elf(2, 1, 2), true},
		{"elf pie", elf(2, 1, 3), true},
		{"elf big-endian executable", elf(2, 2, 2), true},
		{"elf relocatable (bpf object)", elf(2, 1, 1), false},
		{"mach-o 64", append([]byte{0xcf, 0xfa, 0xed, 0xfe}, make([]byte, 60)...), true},
		{"pe", append([]byte("MZ"), make([]byte, 62)...), true},
		{"script", []byte("#!/usr/bin/env bash\n"), false},
		{"text", []byte("package lint\n"), false},
		{"empty", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, executableKind(tc.head) != "")
		})
	}
}
