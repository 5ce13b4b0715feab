package broker_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/segment"
)

// The crash test re-executes this test binary as a writer child and kills it
// with SIGKILL at random moments. These environment variables tell TestMain
// to run as that child instead of running tests.
const (
	crashChildDirEnv   = "FELIX_CRASH_CHILD_DIR"
	crashChildModeEnv  = "FELIX_CRASH_CHILD_MODE"
	crashChildWriteEnv = "FELIX_CRASH_CHILD_WRITE_MODE"
	crashChildSeedEnv  = "FELIX_CRASH_CHILD_SEED"
	crashChildCapEnv   = "FELIX_CRASH_CHILD_MAX_BATCHES"
	// crashSeedEnv replays a logged run: FELIX_CRASH_SEED=N go test ./broker -run Crash
	crashSeedEnv = "FELIX_CRASH_SEED"
)

// TestMain runs the crash child when the crash test started this binary as
// one, and the tests otherwise.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildDirEnv); dir != "" {
		if err := crashChild(dir); err != nil {
			fmt.Fprintf(os.Stderr, "crash child: %v\n", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashStorage is the segment configuration of every open of the crash log:
// small segments so that kills land in rolls too, and a dense index.
func crashStorage(wm segment.WriteMode) segment.Config {
	return segment.Config{SegmentBytes: 256 << 10, IndexSpacingBytes: 1024, WriteMode: wm}
}

// crashPayload is the payload of the record at offset off: its length
// (0–1023 bytes) and bytes derive from the offset alone, so the parent can
// check any record it finds without knowing which child wrote it.
func crashPayload(off uint64) []byte {
	return appendCrashPayload(nil, off)
}

// appendCrashPayload appends the payload of offset off to b: splitmix64
// seeded with the offset gives the length, then the bytes.
func appendCrashPayload(b []byte, off uint64) []byte {
	x := off
	next := func() uint64 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	n := int(next() % 1024)
	start := len(b)
	b = slices.Grow(b, n+8)[:start+n+8]
	for i := start; i < start+n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], next())
	}
	return b[:start+n]
}

// crashChild joins a segment log and a commit sequencer the way
// broker/durable.go does (append and reserve under one lock; the
// post-commit half in the done callback) and reports every acknowledged
// batch on stdout as "ack FIRST END" only after done(nil). It writes until
// it is killed, or stops appending after its batch cap (and waits to be
// killed), and gives up on its own after a minute so it can never outlive
// a crashed parent for long.
func crashChild(dir string) error {
	mode, err := commit.ParseMode(os.Getenv(crashChildModeEnv))
	if err != nil {
		return err
	}
	seed, err := strconv.ParseUint(os.Getenv(crashChildSeedEnv), 10, 64)
	if err != nil {
		return err
	}
	maxBatches, err := strconv.Atoi(os.Getenv(crashChildCapEnv))
	if err != nil {
		return err
	}
	wm := segment.WriteModeFD
	if os.Getenv(crashChildWriteEnv) == segment.WriteModeMapped.String() {
		wm = segment.WriteModeMapped
	}
	log, err := segment.Open(dir, crashStorage(wm))
	if err != nil {
		return err
	}
	seq, err := commit.New(commit.Config{Mode: mode, Interval: 5 * time.Millisecond, Syncer: log})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(os.Stdout, "open %d %d\n", log.First(), log.Next()); err != nil {
		return err
	}

	var shard sync.Mutex // the shard lock of durable.publish
	var batches int
	const writers = 4
	errc := make(chan error, writers)
	for w := range writers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		go func() {
			acked := make(chan error, 1)
			for {
				shard.Lock()
				if batches >= maxBatches {
					shard.Unlock()
					return // wait for the kill
				}
				batches++
				next := log.Next()
				payloads := make([][]byte, 1+rng.IntN(16))
				for i := range payloads {
					payloads[i] = crashPayload(next + uint64(i))
				}
				base, err := log.Append(payloads, time.Now().UnixMicro())
				if err == nil && base != next {
					err = fmt.Errorf("append got offset %d, Next said %d", base, next)
				}
				if err == nil {
					end := base + uint64(len(payloads))
					err = seq.Reserve(base, end, func(err error) {
						if err == nil {
							_, err = fmt.Fprintf(os.Stdout, "ack %d %d\n", base, end)
						}
						acked <- err
					})
				}
				shard.Unlock()
				if err == nil {
					err = <-acked
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	select {
	case err := <-errc:
		return err
	case <-time.After(time.Minute):
		return errors.New("not killed within a minute")
	}
}

// crashTrigger is when the parent kills a child.
type crashTrigger struct {
	afterAcks  int           // kill once this many acks arrived (-1: not this trigger)
	afterOpen  time.Duration // kill this long after the child opened the log (-1: not this trigger)
	afterStart time.Duration // kill this long after starting the child (-1: not this trigger)
}

func randomTrigger(rng *rand.Rand, maxAcks int) crashTrigger {
	tr := crashTrigger{afterAcks: -1, afterOpen: -1, afterStart: -1}
	switch rng.IntN(5) {
	case 0, 1:
		tr.afterAcks = rng.IntN(maxAcks + 1)
	case 2, 3:
		tr.afterOpen = time.Duration(rng.Int64N(int64(20 * time.Millisecond)))
	default: // possibly while the child is still recovering the log
		tr.afterStart = time.Duration(rng.Int64N(int64(60 * time.Millisecond)))
	}
	return tr
}

type ackRange struct{ first, end uint64 }

// crashChildRun is what one child reported before it died.
type crashChildRun struct {
	opened     bool
	openedNext uint64
	acks       []ackRange
}

// runCrashChild starts a child on dir, kills it with SIGKILL when tr fires,
// and returns every ack it wrote before dying.
func runCrashChild(t *testing.T, dir string, mode commit.Mode, wm segment.WriteMode, seed uint64, maxBatches int, tr crashTrigger) crashChildRun {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildDirEnv+"="+dir, crashChildModeEnv+"="+mode.String(),
		crashChildWriteEnv+"="+wm.String(), crashChildSeedEnv+"="+strconv.FormatUint(seed, 10),
		crashChildCapEnv+"="+strconv.Itoa(maxBatches))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()

	var run crashChildRun
	parse := func(line string) {
		f := strings.Fields(line)
		require.Len(t, f, 3, "child line %q", line)
		a, err1 := strconv.ParseUint(f[1], 10, 64)
		b, err2 := strconv.ParseUint(f[2], 10, 64)
		require.NoError(t, errors.Join(err1, err2), "child line %q", line)
		switch f[0] {
		case "open":
			run.opened, run.openedNext = true, b
		case "ack":
			run.acks = append(run.acks, ackRange{a, b})
		default:
			t.Fatalf("child line %q", line)
		}
	}
	var timer <-chan time.Time
	if tr.afterStart >= 0 {
		timer = time.After(tr.afterStart)
	}
	watchdog := time.After(30 * time.Second)
	exitedEarly := false
wait:
	for tr.afterAcks != 0 || !run.opened {
		select {
		case line, ok := <-lines:
			if !ok {
				exitedEarly = true
				break wait
			}
			parse(line)
			if strings.HasPrefix(line, "open") && tr.afterOpen >= 0 {
				timer = time.After(tr.afterOpen)
			}
			if tr.afterAcks > 0 && len(run.acks) >= tr.afterAcks {
				break wait
			}
		case <-timer:
			break wait
		case <-watchdog:
			_ = cmd.Process.Kill()
			t.Fatalf("crash child: trigger %+v did not fire in 30 s; stderr: %s", tr, stderr.String())
		}
	}
	_ = cmd.Process.Kill() // SIGKILL on Unix
	for line := range lines {
		parse(line) // acks written before the kill landed are acks too
	}
	err = cmd.Wait()
	if exitedEarly || cmd.ProcessState.ExitCode() != -1 {
		t.Fatalf("crash child exited on its own (%v, killed=%v): %s", err, !exitedEarly, stderr.String())
	}
	return run
}

// crashTally is what a series of rounds saw, for the test log.
type crashTally struct {
	rounds, acks                 int
	recordsAcked, recordsFound   uint64
	lostAcked                    uint64 // acked records missing after a kill (allowed only without on_commit)
	tornTails, truncatedRecords  int64
	truncatedBytes               int64
	segmentsDiscarded, rebuilt   int
	kills                        map[string]int
	segments                     int
	verifyTime, childTime, total time.Duration
}

// verifyCrashLog reopens the log (recovery) and checks every record from
// First: contiguous offsets, and the payload each offset must carry. It
// returns the log's Next.
func verifyCrashLog(t *testing.T, dir string, tally *crashTally) uint64 {
	t.Helper()
	log, err := segment.Open(dir, crashStorage(segment.WriteModeFD))
	require.NoError(t, err, "recovery after a kill")
	defer func() { require.NoError(t, log.Close()) }()
	st := log.Stats()
	if rs := st.Recovery; rs.TruncatedRecords > 0 {
		tally.tornTails++
		tally.truncatedRecords += rs.TruncatedRecords
		tally.truncatedBytes += rs.TruncatedBytes
	}
	tally.segmentsDiscarded += st.Recovery.SegmentsDiscarded
	tally.rebuilt += st.Recovery.IndexesRebuilt
	tally.segments = st.Segments
	require.Equal(t, uint64(0), log.First(), "no retention: the log starts at 0")

	r, err := log.NewReader(log.First())
	require.NoError(t, err)
	defer r.Close()
	now := time.Now().UnixMicro()
	want := log.First()
	var expect []byte
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		// Plain comparisons: require's reflection costs more than the
		// record itself here, and this loop runs over the whole log 260 times.
		if err != nil {
			t.Fatalf("record %d: %v", want, err)
		}
		if rec.Offset != want {
			t.Fatalf("record at %d has offset %d: offsets are not contiguous from First", want, rec.Offset)
		}
		if expect = appendCrashPayload(expect[:0], rec.Offset); !bytes.Equal(expect, rec.Payload) {
			t.Fatalf("record %d holds %d bytes that were never written there", rec.Offset, len(rec.Payload))
		}
		if rec.TimestampMicros <= 0 || rec.TimestampMicros > now {
			t.Fatalf("record %d has timestamp %d, outside (0, %d]", rec.Offset, rec.TimestampMicros, now)
		}
		want++
	}
	require.Equal(t, log.Next(), want, "the reader reaches Next")
	return want
}

// crashSeed is the run's seed: FELIX_CRASH_SEED replays a logged one.
func crashSeed(t *testing.T) uint64 {
	if s := os.Getenv(crashSeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "%s", crashSeedEnv)
		return seed
	}
	return rand.Uint64()
}

// docs/design.md, "Semantics", durability: a writer killed with SIGKILL at random
// moments, 200 times against one directory in on_commit mode, never loses
// an acknowledged record, and recovery always yields contiguous offsets
// whose contents are exactly what was written. In periodic and never modes
// (30 kills each) recovery must still succeed with contiguous, valid
// records; acked records lost there are counted, not failed.
func TestDurableCrashKill9KeepsAckedRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: 260 child processes killed with SIGKILL; runs in make unit, not under -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("crash test: Linux is the crash-tested platform (segment/doc.go)")
	}
	seed := crashSeed(t)
	t.Logf("crash seed %d (replay: %s=%d go test ./broker -run TestDurableCrash)", seed, crashSeedEnv, seed)
	for i, tc := range []struct {
		mode       commit.Mode
		rounds     int
		maxAcks    int // the ack-count trigger's upper bound
		maxBatches int // per child: bounds the log's growth in the fast modes
	}{
		{commit.OnCommit, 200, 40, 1000},
		{commit.Periodic, 30, 100, 150},
		{commit.Never, 30, 100, 150},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			tally := crashRounds(t, t.TempDir(), tc.mode, tc.rounds, tc.maxAcks, tc.maxBatches, rng)
			t.Logf("%s: %d rounds in %v (children %v, verify %v); kills %v; %d acks, %d records acked, "+
				"%d records found (%d segments); %d acked records lost; torn tails cut in %d rounds "+
				"(%d records, %d bytes); %d segments discarded; %d indexes rebuilt",
				tc.mode, tally.rounds, tally.total.Round(time.Millisecond), tally.childTime.Round(time.Millisecond),
				tally.verifyTime.Round(time.Millisecond), tally.kills, tally.acks, tally.recordsAcked,
				tally.recordsFound, tally.segments, tally.lostAcked, tally.tornTails, tally.truncatedRecords,
				tally.truncatedBytes, tally.segmentsDiscarded, tally.rebuilt)
		})
	}
}

// crashRounds runs the kill-and-recover rounds of one mode against dir.
func crashRounds(t *testing.T, dir string, mode commit.Mode, rounds, maxAcks, maxBatches int, rng *rand.Rand) crashTally {
	start := time.Now()
	tally := crashTally{kills: map[string]int{}}
	var ackedEnd, floor uint64 // highest acked end; Next after the last recovery
	for round := range rounds {
		wm := segment.WriteModeFD
		if round%2 == 1 {
			wm = segment.WriteModeMapped
		}
		tr := randomTrigger(rng, maxAcks)
		switch {
		case tr.afterAcks >= 0:
			tally.kills["after_acks"]++
		case tr.afterOpen >= 0:
			tally.kills["after_open"]++
		default:
			tally.kills["after_start"]++
		}
		childStart := time.Now()
		run := runCrashChild(t, dir, mode, wm, rng.Uint64(), maxBatches, tr)
		tally.childTime += time.Since(childStart)

		// Acks arrive in reservation order and cover contiguous appends
		// starting at the Next the child opened with.
		prev := run.openedNext
		for _, a := range run.acks {
			require.Equal(t, prev, a.first, "round %d: acks are contiguous and in order", round)
			require.Greater(t, a.end, a.first, "round %d", round)
			prev = a.end
			tally.recordsAcked += a.end - a.first
			ackedEnd = max(ackedEnd, a.end)
		}
		if run.opened {
			require.Equal(t, floor, run.openedNext, "round %d: the child opened what the last recovery left", round)
		}
		tally.acks += len(run.acks)

		verifyStart := time.Now()
		next := verifyCrashLog(t, dir, &tally)
		tally.verifyTime += time.Since(verifyStart)
		require.GreaterOrEqual(t, next, floor, "round %d: records a recovery kept (and synced) are never lost", round)
		if next < ackedEnd {
			if mode == commit.OnCommit {
				t.Fatalf("round %d (%v writes): acked records [%d, %d) missing after kill -9; log ends at %d",
					round, wm, next, ackedEnd, next)
			}
			tally.lostAcked += ackedEnd - next
			ackedEnd = next
		}
		floor = next
		tally.rounds++
		tally.recordsFound = next
	}
	tally.total = time.Since(start)
	return tally
}
