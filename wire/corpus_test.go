package wire_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/wire"
	"github.com/felixmq/felix/wire/wirevector"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz seeds from the vectors")

// corpusFile renders values in the `go test fuzz v1` format.
func corpusFile(values ...any) string {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case uint16:
			fmt.Fprintf(&b, "uint16(%d)\n", v)
		default:
			panic(fmt.Sprintf("corpusFile: unsupported %T", v))
		}
	}
	return b.String()
}

// fuzzSeeds maps "FuzzXxx/name" to file content: every vector frame seeds
// FuzzFrame, and its payload seeds the target for its layout (negative
// vectors included, when their header parses far enough to have a layout).
func fuzzSeeds(t *testing.T) map[string]string {
	seeds := map[string]string{}
	for _, v := range loadVectors(t) {
		frame, err := wirevector.ParseHex(v.FrameHex)
		require.NoError(t, err)
		seeds["FuzzFrame/"+v.Name] = corpusFile(frame)
		if len(frame) < wire.HeaderLen || string(frame[:4]) != "FLX1" {
			continue
		}
		flags := wire.Flags(uint16(frame[6])<<8 | uint16(frame[7]))
		payload := frame[wire.HeaderLen:]
		k, err := wire.KindFromFlags(flags)
		if err != nil {
			continue
		}
		target := map[wire.Kind]string{
			wire.KindJSON:              "FuzzJSON",
			wire.KindPublishBatch:      "FuzzPublishBatch",
			wire.KindAckedPublishBatch: "FuzzAckedPublish",
			wire.KindPublishAck:        "FuzzPublishAck",
			wire.KindEventBatch:        "FuzzEventBatch",
			wire.KindEventBatchShared:  "FuzzEventBatch",
		}[k]
		if target != "FuzzJSON" {
			seeds[target+"/"+v.Name] = corpusFile(uint16(flags), payload)
		} else {
			seeds[target+"/"+v.Name] = corpusFile(payload)
		}
		if target == "FuzzJSON" {
			seeds["FuzzSplitObject/"+v.Name] = corpusFile(payload)
		}
		for i, pairs := range v.Headers {
			hs := make([]wire.EventHeader, 0, len(pairs))
			for _, p := range pairs {
				hs = append(hs, wire.EventHeader{Key: p[0], Value: p[1]})
			}
			block, err := wire.AppendHeaders(nil, hs)
			require.NoError(t, err)
			seeds[fmt.Sprintf("FuzzHeaderBlock/%s_%d", v.Name, i)] = corpusFile(block)
		}
	}
	return seeds
}

// TestFuzzCorpus keeps the checked-in seeds in step with the vectors.
func TestFuzzCorpus(t *testing.T) {
	for name, content := range fuzzSeeds(t) {
		path := filepath.Join("testdata", "fuzz", name)
		if *updateCorpus {
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "run go test ./wire -run TestFuzzCorpus -update-corpus")
		require.Equal(t, content, string(got), path)
	}
}
