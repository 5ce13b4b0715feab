package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestWireCheckVectors(t *testing.T) {
	files, err := filepath.Glob("../../wire/testdata/vectors/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	code, out, _ := runCLI(append([]string{"wire", "check"}, files...)...)
	require.Equal(t, exitOK, code, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(files))
	for _, l := range lines {
		require.True(t, strings.HasPrefix(l, "ok "), l)
	}
}

func TestWireCheckBrokenVector(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "ok.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"name":"ok","payload_json":"{\"type\":\"ok\"}",
		"frame_hex":"464c5831000100000000000d7b2274797065223a226f6b227d"}`), 0o644))
	// Same message, but the length field says 14.
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"name":"bad","payload_json":"{\"type\":\"ok\"}",
		"frame_hex":"464c5831000100000000000e7b2274797065223a226f6b227d"}`), 0o644))
	// A negative vector naming the wrong error.
	wrongErr := filepath.Join(dir, "wrong_err.json")
	require.NoError(t, os.WriteFile(wrongErr, []byte(`{"name":"wrong_err","frame_hex":"464c5832","error":"ErrBadMagic"}`), 0o644))
	missing := filepath.Join(dir, "missing.json")

	code, out, _ := runCLI("wire", "check", good, bad, wrongErr, missing)
	require.Equal(t, exitFail, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4)
	require.Equal(t, "ok ok", lines[0])
	require.True(t, strings.HasPrefix(lines[1], "FAIL bad: "), lines[1])
	require.True(t, strings.HasPrefix(lines[2], "FAIL wrong_err: "), lines[2])
	require.True(t, strings.HasPrefix(lines[3], "FAIL missing: "), lines[3])
}

func TestWireDecode(t *testing.T) {
	code, out, errOut := runCLI("wire", "decode",
		"464c5831 00010009 00000029", "0000000000000007 02 0002 7431 0007 64656661756c74 0004 64656d6f\n000000010000000568656c6c6f")
	require.Equal(t, exitOK, code, errOut)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, "binary_acked_publish_batch", got["kind"])
	require.Equal(t, map[string]any{"magic": "FLX1", "version": 1.0, "flags": "0x0009", "length": 41.0}, got["header"])
	require.Equal(t, map[string]any{
		"request_id": 7.0, "ack_mode": "per_batch", "tenant_id": "t1", "namespace": "default", "stream": "demo",
		"payloads_utf8": []any{"hello"},
	}, got["message"])

	code, out, _ = runCLI("wire", "decode", "464c58310001000400000009 00000001 00000001 ff")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, `"payloads_hex": [`)

	code, out, _ = runCLI("wire", "decode", "464c5831000100000000000d7b2274797065223a226f6b227d")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, `"type": "ok"`)
}

func TestWireUsageAndErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{nil, exitUsage},
		{[]string{"nope"}, exitUsage},
		{[]string{"wire"}, exitUsage},
		{[]string{"wire", "nope"}, exitUsage},
		{[]string{"wire", "check"}, exitUsage},
		{[]string{"wire", "decode"}, exitUsage},
		{[]string{"wire", "decode", "zz"}, exitUsage},
		{[]string{"wire", "decode", "464c5831000100400000000"}, exitUsage},
		{[]string{"wire", "decode", "464c583100010040 00000000"}, exitFail},
		{[]string{"wire", "decode", "-max-frame", "8", "464c5831000100000000000d7b2274797065223a226f6b227d"}, exitFail},
	}
	for _, tt := range tests {
		code, _, _ := runCLI(tt.args...)
		require.Equal(t, tt.code, code, "%q", tt.args)
	}
}
