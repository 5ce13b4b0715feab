package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/felixmq/felix/internal/cli"
	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

const logUsage = `usage:
  felix log verify DIR                     check every record's CRC; changes nothing
  felix log dump DIR [--from N] [--count N] [--json]  print records: offset, time, length, producer mark, payload
  felix log stat DIR [--json]              segments, versions, offsets, sizes, index health, producer batches

DIR is one shard's log directory (DATA_DIR/<shard dir>). verify exits 1 on
corruption, naming file and byte; a torn tail that recovery would cut (an
unacknowledged write cut off by a crash) is reported and is not a failure.`

// runLog dispatches `felix log verify|dump|stat`.
func runLog(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "verify":
			return logVerify(args[1:], stdout, stderr)
		case "dump":
			return logDump(args[1:], stdout, stderr)
		case "stat":
			return logStat(args[1:], stdout, stderr)
		}
		if cli.IsHelp(args[0]) {
			return cli.Fail(cli.ErrHelp, "felix log", logUsage, nil, stdout, stderr)
		}
	}
	if len(args) == 0 {
		cli.PrintUsage(stderr, logUsage, nil)
		return exitUsage
	}
	return cli.Fail(errors.New("want verify, dump or stat"), "felix log", logUsage, nil, stdout, stderr)
}

// logFlags are the flags of the log commands (dump takes them all).
type logFlags struct {
	from  string
	count uint64
	json  bool
}

func newLogFlags(verb string) (*flag.FlagSet, *logFlags) {
	set := flag.NewFlagSet("felix log "+verb, flag.ContinueOnError)
	f := &logFlags{}
	if verb == "dump" {
		set.StringVar(&f.from, "from", "", "first `OFFSET` (default: the oldest retained)")
		set.Uint64Var(&f.count, "count", 0, "records to print (0: all)")
	}
	if verb != "verify" {
		set.BoolVar(&f.json, "json", false, "print JSON (dump: one object per record)")
	}
	return set, f
}

// parseDir parses the flags of verb, which may come before or after the
// one DIR argument; false (with the exit status) when they are wrong or
// ask for help.
func parseDir(verb string, args []string, stdout, stderr io.Writer) (string, *logFlags, int, bool) {
	set, f := newLogFlags(verb)
	pos, err := cli.Parse(set, args)
	if err == nil && len(pos) != 1 {
		err = errors.New("want one DIR")
	}
	if err == nil && f.from != "" {
		if _, perr := strconv.ParseUint(f.from, 10, 64); perr != nil {
			err = fmt.Errorf("--from %q: want an offset", f.from)
		}
	}
	if err != nil {
		return "", nil, cli.Fail(err, "felix log "+verb, logUsage, set, stdout, stderr), false
	}
	return pos[0], f, 0, true
}

func logVerify(args []string, stdout, stderr io.Writer) int {
	dir, _, code, ok := parseDir("verify", args, stdout, stderr)
	if !ok {
		return code
	}
	start := time.Now()
	l, ro, err := openReadOnly(dir, true)
	if err != nil {
		return reportOpenError(dir, err, stdout, stderr)
	}
	defer l.Close()
	st := l.Stats()
	rs := st.Recovery
	fmt.Fprintf(stdout, "ok %s: %d segments, records [%d, %d), %d records / %d bytes checked in %v\n",
		dir, st.Segments, st.First, st.Next, rs.RecordsScanned, rs.BytesScanned, time.Since(start).Round(time.Microsecond))
	if rs.TruncatedRecords > 0 {
		fmt.Fprintf(stdout, "note: recovery would cut a torn tail: %d records, %d bytes (never acknowledged)\n",
			rs.TruncatedRecords, rs.TruncatedBytes)
	}
	if rs.SegmentsDiscarded > 0 {
		fmt.Fprintf(stdout, "note: recovery would discard %d never-installed (all-zero) segment(s)\n", rs.SegmentsDiscarded)
	}
	if rs.IncompleteBatches > 0 {
		fmt.Fprintf(stdout, "note: %d producer batch(es) before the tail hold fewer records than they declare (kept as they are)\n", rs.IncompleteBatches)
	}
	for _, c := range ro.changes() {
		fmt.Fprintf(stdout, "note: recovery would %s\n", c)
	}
	return exitOK
}

// reportOpenError prints why the log could not be opened: corruption goes
// to stdout as the verdict (file and byte), anything else to stderr.
func reportOpenError(dir string, err error, stdout, stderr io.Writer) int {
	var ce *segment.CorruptionError
	if errors.As(err, &ce) {
		fmt.Fprintf(stdout, "FAIL %s: %s at %s byte %d", dir, ce.Kind, ce.Path, ce.Offset)
		if d := strings.TrimPrefix(ce.Detail, "; "); d != "" {
			fmt.Fprintf(stdout, ": %s", d)
		}
		fmt.Fprintln(stdout)
		return exitFail
	}
	fmt.Fprintf(stderr, "felix log: %s: %v\n", dir, err)
	return exitFail
}

func logDump(args []string, stdout, stderr io.Writer) int {
	dir, f, code, ok := parseDir("dump", args, stdout, stderr)
	if !ok {
		return code
	}
	count := &f.count
	l, _, err := openReadOnly(dir, false)
	if err != nil {
		return reportOpenError(dir, err, stdout, stderr)
	}
	defer l.Close()
	start := l.First()
	if f.from != "" {
		start, _ = strconv.ParseUint(f.from, 10, 64) // checked by parseDir
	}
	r, err := l.NewReader(start)
	if err != nil {
		fmt.Fprintf(stderr, "felix log dump: %v\n", err)
		return exitFail
	}
	defer r.Close()
	var line []byte
	var batch batchPos
	for n := uint64(0); *count == 0 || n < *count; n++ {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return reportOpenError(dir, err, stdout, stderr)
		}
		if f.json {
			line = appendRecordJSON(line[:0], rec, &batch)
		} else {
			line = appendRecordLine(line[:0], rec, batch.next(rec.Mark))
		}
		if _, err := stdout.Write(line); err != nil {
			return exitFail
		}
	}
	return exitOK
}

// appendRecordLine formats one record: offset, RFC 3339 time in UTC with
// microseconds, payload length, the producer mark of a record of an
// idempotent producer's batch (producer, sequence and the record's place in
// the batch; "batch=continues" for a batch whose opening record was not
// read; "generation (not an event)" for a replica's term start), the
// publisher and the event headers when the record has them, and the
// payload as `felix sub` prints it (text when printable UTF-8, else 0x and
// hex), last so spaces are safe.
func appendRecordLine(b []byte, rec segment.Record, mark string) []byte {
	b = fmt.Appendf(b, "offset=%d time=%s len=%d %s", rec.Offset,
		time.UnixMicro(rec.TimestampMicros).UTC().Format("2006-01-02T15:04:05.000000Z07:00"), len(rec.Payload), mark)
	if rec.Publisher != nil {
		b = fmt.Appendf(b, "publisher=%s ", printable(rec.Publisher))
	}
	if rec.Headers != nil {
		hs, err := wire.ParseHeaders(rec.Headers)
		if err != nil {
			b = fmt.Appendf(b, "headers=invalid(%s) ", printable(rec.Headers))
		} else {
			b = fmt.Appendf(b, "headers=[%s] ", wire.FormatHeaders(hs))
		}
	}
	return fmt.Appendf(b, "payload=%s\n", printable(rec.Payload))
}

// appendRecordJSON is appendRecordLine as one JSON object: offset, time,
// len, producer, sequence and batch ("AT/LEN", or "continues") when marked,
// publisher and headers ([{"key":K,"value":V},...], or "headers_invalid"
// with the block's bytes) when the record has them, and payload (or
// payload_base64).
func appendRecordJSON(b []byte, rec segment.Record, batch *batchPos) []byte {
	obj := map[string]any{"offset": rec.Offset, "len": len(rec.Payload),
		"time": time.UnixMicro(rec.TimestampMicros).UTC().Format("2006-01-02T15:04:05.000000Z07:00")}
	if batch.next(rec.Mark) != "" {
		if batch.at == 0 {
			obj["batch"] = "continues"
		} else {
			obj["producer"], obj["sequence"], obj["batch"] = batch.producer, batch.sequence, fmt.Sprintf("%d/%d", batch.at, batch.len)
		}
	}
	if rec.Publisher != nil {
		payloadFields(obj, "publisher", rec.Publisher)
	}
	if rec.Headers != nil {
		if hs, err := wire.ParseHeaders(rec.Headers); err != nil {
			payloadFields(obj, "headers_invalid", rec.Headers)
		} else {
			obj["headers"] = headerObjects(hs)
		}
	}
	raw, _ := json.Marshal(payloadFields(obj, "payload", rec.Payload)) // maps of plain values always marshal
	return append(append(b, raw...), '\n')
}

// batchPos follows the marked batch dump is in.
type batchPos struct {
	producer, sequence uint64
	at, len            uint32 // at 0: no open batch seen
}

// next is the mark text of a record with mark m ("" for an unmarked one).
func (p *batchPos) next(m segment.Mark) string {
	switch m.Kind {
	case segment.MarkGeneration:
		*p = batchPos{}
		return "generation (not an event) "
	case segment.MarkOpens:
		*p = batchPos{producer: m.ProducerID, sequence: m.Sequence, at: 1, len: m.Len}
	case segment.MarkContinues:
		if p.at == 0 {
			return "batch=continues "
		}
		p.at++
	default:
		*p = batchPos{}
		return ""
	}
	return fmt.Sprintf("producer=%d sequence=%d batch=%d/%d ", p.producer, p.sequence, p.at, p.len)
}

func logStat(args []string, stdout, stderr io.Writer) int {
	dir, f, code, ok := parseDir("stat", args, stdout, stderr)
	if !ok {
		return code
	}
	l, ro, err := openReadOnly(dir, false)
	if err != nil {
		return reportOpenError(dir, err, stdout, stderr)
	}
	defer l.Close()
	st := l.Stats()
	files, err := segmentFiles(dir)
	if err != nil {
		fmt.Fprintf(stderr, "felix log stat: %v\n", err)
		return exitFail
	}
	rep := statReport{First: st.First, Next: st.Next, Segments: st.Segments, ContentBytes: st.RetainedBytes,
		IndexesRebuilt: st.Recovery.IndexesRebuilt}
	for i, sf := range files {
		end := st.Next
		if i+1 < len(files) {
			end = files[i+1].base
		}
		index := "none (active: kept in memory, written when sealed)"
		switch {
		case ro.rebuilt(sf.indexPath):
			index = "invalid or missing: recovery would rebuild it"
		case sf.indexBytes >= 0:
			index = fmt.Sprintf("%d entries, ok", (sf.indexBytes-segment.IndexHeaderBytes)/segment.IndexEntryBytes)
		}
		rep.Files = append(rep.Files, statFile{Segment: filepath.Base(sf.path), Version: sf.version, Base: sf.base,
			FileBytes: sf.bytes, Records: end - sf.base, Index: index})
		rep.DiskBytes += sf.bytes + max(sf.indexBytes, 0)
	}
	producers := map[uint64]bool{}
	if err := l.Batches(st.First, func(b segment.MarkedBatch) bool {
		rep.ProducerBatches++
		producers[b.ProducerID] = true
		return true
	}); err != nil {
		return reportOpenError(dir, err, stdout, stderr)
	}
	rep.Producers = len(producers)
	rep.TornTailRecords, rep.TornTailBytes = st.Recovery.TruncatedRecords, st.Recovery.TruncatedBytes
	if f.json {
		writeJSONLine(stdout, rep)
		return exitOK
	}
	rep.print(stdout)
	return exitOK
}

// statReport is what `felix log stat` prints.
type statReport struct {
	Files           []statFile `json:"files"`
	First           uint64     `json:"first"`
	Next            uint64     `json:"next"`
	Segments        int        `json:"segments"`
	ContentBytes    int64      `json:"content_bytes"`
	DiskBytes       int64      `json:"disk_bytes"`
	IndexesRebuilt  int        `json:"indexes_rebuilt"`
	ProducerBatches int        `json:"producer_batches"`
	Producers       int        `json:"producers"`
	TornTailRecords int64      `json:"torn_tail_records"`
	TornTailBytes   int64      `json:"torn_tail_bytes"`
}

type statFile struct {
	Segment   string `json:"segment"`
	Version   uint16 `json:"version"`
	Base      uint64 `json:"base"`
	FileBytes int64  `json:"file_bytes"`
	Records   uint64 `json:"records"`
	Index     string `json:"index"`
}

func (r *statReport) print(w io.Writer) {
	fmt.Fprintf(w, "%-24s %7s %20s %12s %10s  %s\n", "segment", "version", "base", "file_bytes", "records", "index")
	for _, f := range r.Files {
		fmt.Fprintf(w, "%-24s %7s %20d %12d %10d  %s\n", f.Segment, versionName(f.Version), f.Base, f.FileBytes, f.Records, f.Index)
	}
	fmt.Fprintf(w, "first %d\nnext %d\nsegments %d\ncontent_bytes %d\ndisk_bytes %d\nindexes_rebuilt %d\n",
		r.First, r.Next, r.Segments, r.ContentBytes, r.DiskBytes, r.IndexesRebuilt)
	fmt.Fprintf(w, "producer_batches %d\nproducers %d\n", r.ProducerBatches, r.Producers)
	if r.TornTailRecords > 0 {
		fmt.Fprintf(w, "torn_tail %d records, %d bytes (recovery would cut it)\n", r.TornTailRecords, r.TornTailBytes)
	}
}

// segmentFile is one .log file of a log directory and its index.
type segmentFile struct {
	path, indexPath   string
	base              uint64
	version           uint16 // of the segment header; 0 when unreadable
	bytes, indexBytes int64  // indexBytes -1: no index file
}

func segmentFiles(dir string) ([]segmentFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []segmentFile
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), ".log")
		base, err := strconv.ParseUint(stem, 10, 64)
		if !ok || len(stem) != 20 || err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		f := segmentFile{path: filepath.Join(dir, e.Name()), indexPath: filepath.Join(dir, stem+".index"),
			base: base, bytes: info.Size(), indexBytes: -1}
		if ii, err := os.Stat(f.indexPath); err == nil {
			f.indexBytes = ii.Size()
		}
		f.version = headerVersion(f.path)
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b segmentFile) int { return compare(a.base, b.base) })
	return out, nil
}

// versionName is a segment version as the storage format writes it: the
// published ones in decimal, ours (the high bit set) in hex.
func versionName(v uint16) string {
	if v&0x8000 != 0 {
		return fmt.Sprintf("%#04x", v)
	}
	return strconv.Itoa(int(v))
}

// headerVersion reads the version field of a segment header, 0 when the
// file is too short or unreadable (Open reports why).
func headerVersion(path string) uint16 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var b [6]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0
	}
	return uint16(b[4])<<8 | uint16(b[5])
}

func compare(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
