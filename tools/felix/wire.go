package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/wire"
	"github.com/felixmq/felix/wire/wirevector"
)

const wireUsage = `usage:
  felix wire check FILE...          check vector files (prints ok NAME / FAIL NAME: reason)
  felix wire decode HEX [--max-frame N]  decode one frame and print it as JSON`

// runWire dispatches `felix wire check` and `felix wire decode`.
func runWire(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return wireCheck(args[1:], stdout, stderr)
		case "decode":
			return wireDecode(args[1:], stdout, stderr)
		}
		if cli.IsHelp(args[0]) {
			return cli.Fail(cli.ErrHelp, "felix wire", wireUsage, nil, stdout, stderr)
		}
	}
	if len(args) == 0 {
		cli.PrintUsage(stderr, wireUsage, nil)
		return exitUsage
	}
	return cli.Fail(errors.New("want check or decode"), "felix wire", wireUsage, nil, stdout, stderr)
}

// wireCheck checks each vector file and reports one line per file.
func wireCheck(args []string, stdout, stderr io.Writer) int {
	set := flag.NewFlagSet("felix wire check", flag.ContinueOnError)
	files, err := cli.Parse(set, args)
	if err == nil && len(files) == 0 {
		err = errors.New("want FILE...")
	}
	if err != nil {
		return cli.Fail(err, "felix wire check", wireUsage, set, stdout, stderr)
	}
	code := exitOK
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		v, err := wirevector.Load(path)
		if err == nil {
			if v.Name != "" {
				name = v.Name
			}
			err = wirevector.Check(v)
		}
		if err != nil {
			fmt.Fprintf(stdout, "FAIL %s: %v\n", name, err)
			code = exitFail
			continue
		}
		fmt.Fprintf(stdout, "ok %s\n", name)
	}
	return code
}

// decodeOutput is what `felix wire decode` prints.
type decodeOutput struct {
	Header  headerOutput    `json:"header"`
	Kind    string          `json:"kind"`
	Message json.RawMessage `json:"message"`
}

type headerOutput struct {
	Magic   string `json:"magic"`
	Version uint16 `json:"version"`
	Flags   string `json:"flags"`
	Length  uint32 `json:"length"`
}

// wireDecode decodes one frame given as hex; whitespace anywhere in the
// arguments is ignored, so `xxd -p` output can be pasted as is.
func newWireDecodeFlags() (*flag.FlagSet, *uint) {
	set := flag.NewFlagSet("felix wire decode", flag.ContinueOnError)
	return set, set.Uint("max-frame", wire.DefaultMaxFrameBytes, "payload cap in bytes")
}

func wireDecode(args []string, stdout, stderr io.Writer) int {
	set, maxFrame := newWireDecodeFlags()
	hexArgs, err := cli.Parse(set, args)
	if err == nil && (len(hexArgs) == 0 || *maxFrame > 1<<32-1) {
		err = errors.New("want HEX, and --max-frame within 32 bits")
	}
	if err != nil {
		return cli.Fail(err, "felix wire decode", wireUsage, set, stdout, stderr)
	}
	frame, err := wirevector.ParseHex(strings.Join(hexArgs, ""))
	if err != nil {
		fmt.Fprintf(stderr, "felix wire decode: bad hex: %v\n", err)
		return exitUsage
	}
	d, err := wirevector.Decode(frame, uint32(*maxFrame))
	if err != nil {
		fmt.Fprintf(stderr, "felix wire decode: %v\n", err)
		return exitFail
	}
	out := decodeOutput{
		Header: headerOutput{Magic: "FLX1", Version: wire.Version, Flags: d.Header.Flags.String(), Length: d.Header.Length},
		Kind:   d.Kind.String(),
	}
	if d.JSON != nil {
		out.Message = d.JSON.AppendJSON(nil)
	} else {
		fields := d.Fields
		fields.Kind, fields.Flags = "", nil
		out.Message, _ = json.Marshal(fields)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "felix wire decode: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return exitOK
}
