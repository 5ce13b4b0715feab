package broker_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/internal/testutil"
	"github.com/felixmq/felix/segment"
)

// faultStorage is the segment configuration of the fault tests: small
// segments, so that rolls (seal, index, create) happen within a few batches.
func faultStorage(fsys segment.FS, wm segment.WriteMode) segment.Config {
	return segment.Config{SegmentBytes: 64 << 10, IndexSpacingBytes: 1024, FS: fsys, WriteMode: wm}
}

// faultCase is a disk failure the durable path must survive.
type faultCase struct {
	name  string
	wm    segment.WriteMode
	fault faultFunc
	cause error
}

// faultCases returns the failures, each starting after the storage has
// done some work successfully; fresh ones per call, as a Fault counts calls.
func faultCases() []faultCase {
	return []faultCase{
		{"fdatasync EIO", segment.WriteModeFD, failFrom(opSyncData, 6, syscall.EIO), syscall.EIO},
		{"write EIO", segment.WriteModeFD, failFrom(opWrite, 20, syscall.EIO), syscall.EIO},
		{"write ENOSPC", segment.WriteModeFD, failFrom(opWrite, 20, syscall.ENOSPC), syscall.ENOSPC},
		{"short write", segment.WriteModeFD, failFrom(opWrite, 20, errShortWrite), nil},
		{"seal fsync EIO", segment.WriteModeFD, failFrom(opSync, 1, syscall.EIO), syscall.EIO},
		{"msync EIO", segment.WriteModeMapped, failFrom(opMsync, 6, syscall.EIO), syscall.EIO},
	}
}

// faultPayload is the payload of the i-th record a fault test writes.
func faultPayload(i uint64) []byte { return seq(i, 8+int(i%200)) }

// docs/design.md, "Storage" (a failed sync is terminal), at the join of broker/durable.go:
// under each injected disk failure, with on_commit and four concurrent
// writers appending and reserving under one lock, nothing is acknowledged
// (done(nil)) that the crash image does not hold; once the failure hits,
// every later append or reservation is refused promptly with an error that
// names the failure and its cause; and Close returns that error and stops
// the flusher goroutine.
func TestDurableFaultNothingAckedThatWasNotSynced(t *testing.T) {
	for _, tc := range faultCases() {
		t.Run(tc.name, func(t *testing.T) {
			before := testutil.Goroutines()
			dir := t.TempDir()
			fsys := newFaultFS()
			log, err := segment.Open(dir, faultStorage(fsys, tc.wm))
			require.NoError(t, err)
			seq, err := commit.New(commit.Config{Mode: commit.OnCommit, Syncer: log})
			require.NoError(t, err)
			fsys.setFault(tc.fault)

			acked, refusals := runFaultWriters(t, log, seq)
			require.NotEmpty(t, acked, "some batches were acknowledged before the failure")
			for _, err := range refusals {
				requireStorageFailure(t, err, tc.cause)
			}

			// After the failure: refused at once, never a hang.
			_, err = log.Append([][]byte{[]byte("late")}, time.Now().UnixMicro())
			requireStorageFailure(t, err, tc.cause)
			requireStorageFailure(t, seq.Flush(), tc.cause)

			closeErr := errors.Join(seq.Close(), log.Close())
			require.ErrorIs(t, closeErr, commit.ErrSyncFailed, "Close reports the failure")
			requireStorageFailure(t, closeErr, tc.cause)
			require.ErrorIs(t, seq.Reserve(1<<40, 1<<40+1, func(error) { t.Error("done after Close") }), commit.ErrClosed)
			require.LessOrEqual(t, seq.Stats().SyncErrors, uint64(1), "a failed sync is never retried")

			requireAckedInCrashImage(t, fsys, dir, t.TempDir(), acked)
			testutil.GoroutinesSettle(t, before, 5*time.Second)
		})
	}
}

// runFaultWriters runs four writers that append batches of 1–16 records
// and reserve them under one lock, as durable.publish does, until each has
// been refused once. It returns the acknowledged offsets with the payload
// index each carries, and every refusal.
func runFaultWriters(t *testing.T, log *segment.Log, seq *commit.Sequencer) (map[uint64]uint64, []error) {
	t.Helper()
	var (
		shard    sync.Mutex // the shard lock: append and reserve in order
		mu       sync.Mutex // guards the results below
		acked    = map[uint64]uint64{}
		refusals []error
		payloads uint64
	)
	const writers, maxBatches = 4, 400
	var wg sync.WaitGroup
	for w := range writers {
		rng := rand.New(rand.NewPCG(uint64(w), 4))
		wg.Go(func() {
			done := make(chan error, 1)
			for range maxBatches / writers {
				shard.Lock()
				batch := make([][]byte, 1+rng.IntN(16))
				firstPayload := payloads
				for i := range batch {
					batch[i] = faultPayload(firstPayload + uint64(i))
				}
				payloads += uint64(len(batch))
				base, err := log.Append(batch, time.Now().UnixMicro())
				if err == nil {
					n := uint64(len(batch))
					err = seq.Reserve(base, base+n, func(err error) {
						if err == nil {
							mu.Lock()
							for i := range n {
								acked[base+i] = firstPayload + i
							}
							mu.Unlock()
						}
						done <- err
					})
				}
				shard.Unlock()
				if err == nil {
					err = <-done
				}
				if err != nil {
					mu.Lock()
					refusals = append(refusals, err)
					mu.Unlock()
					return
				}
			}
			t.Errorf("writer %d: no failure in %d batches: the fault never fired", w, maxBatches/writers)
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("writers hang after the injected failure")
	}
	return acked, refusals
}

// requireStorageFailure checks that err is the storage's terminal failure
// and, when known, carries the injected cause.
func requireStorageFailure(t *testing.T, err error, cause error) {
	t.Helper()
	require.Error(t, err)
	if !errors.Is(err, segment.ErrLogFailed) && !errors.Is(err, commit.ErrSyncFailed) {
		t.Fatalf("want a segment.ErrLogFailed or commit.ErrSyncFailed, got %v", err)
	}
	if cause != nil {
		require.ErrorIs(t, err, cause)
	}
}

// requireAckedInCrashImage reopens the crash image of dir (what the syncs
// that succeeded made durable) and checks that every acknowledged offset is
// there with its payload.
func requireAckedInCrashImage(t *testing.T, fsys *faultFS, dir, imageDir string, acked map[uint64]uint64) {
	t.Helper()
	require.NoError(t, fsys.crashImage(dir, imageDir))
	img, err := segment.Open(imageDir, faultStorage(nil, segment.WriteModeFD))
	require.NoError(t, err, "the crash image recovers")
	defer img.Close()
	found := map[uint64][]byte{}
	r, err := img.NewReader(img.First())
	require.NoError(t, err)
	defer r.Close()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		found[rec.Offset] = append([]byte(nil), rec.Payload...)
	}
	for off, i := range acked {
		p, ok := found[off]
		if !ok {
			t.Fatalf("offset %d was acknowledged but is not in the crash image (image holds [%d, %d))", off, img.First(), img.Next())
		}
		require.Equal(t, faultPayload(i), p, "offset %d", off)
	}
	t.Logf("acked %d records; crash image holds %d", len(acked), len(found))
}

// docs/design.md, "Storage", through the broker: when the disk fails under an on_commit
// stream, no publish is acked that the crash image lacks, subscribers never
// receive a record whose sync failed, every later publish is refused with
// the broker's error (not a hang), and Close returns the failure.
func TestDurableFaultBrokerRefusesPublishesAndDeliversOnlySynced(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault faultFunc
		cause error
	}{
		{"fdatasync EIO", failFrom(opSyncData, 1, syscall.EIO), syscall.EIO},
		{"write ENOSPC", failFrom(opWrite, 1, syscall.ENOSPC), syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			fsys := newFaultFS()
			h := serveFaultyBroker(t, broker.Config{DataDir: dataDir, Storage: faultStorage(fsys, segment.WriteModeFD)},
				durableSpec("s", "on_commit"))
			ctx := ctxT(t, 60*time.Second)
			sub, err := h.dial(t).Subscribe(ctx, "default", "s", client.SubscribeOptions{From: client.Earliest()})
			require.NoError(t, err)
			pub, err := h.dial(t).NewPublisher(ctx, "default", "s")
			require.NoError(t, err)

			acked := map[uint64]bool{} // payload sequence numbers
			for i := range uint64(20) {
				require.NoError(t, pub.Publish(ctx, faultPayload(i)))
				acked[i] = true
			}
			fsys.setFault(tc.fault)
			pending := make([]*client.PendingAck, 30)
			for i := range pending {
				pending[i] = pub.PublishAsync([][]byte{faultPayload(uint64(20 + i))})
			}
			refused := 0
			for i, pa := range pending {
				if err := pa.Wait(ctx); err != nil {
					var be *client.BrokerError
					require.ErrorAs(t, err, &be, "a refusal from the broker, not a timeout: %v", err)
					refused++
					continue
				}
				acked[uint64(20+i)] = true
			}
			require.Positive(t, refused, "the failure reached the publishers")

			// Every later publish: refused at once, with the storage failure named.
			for i := range 5 {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := pub.Publish(pctx, faultPayload(uint64(100+i)))
				cancel()
				var be *client.BrokerError
				require.ErrorAs(t, err, &be, "publish %d after the failure: %v", i, err)
				require.Regexp(t, `sync failed|log failed`, be.Message)
			}

			// Subscribers get exactly the acked records, in order (acks
			// come after delivery, so they are all on their way) ...
			delivered := 0
			for ; delivered < len(acked); delivered++ {
				ev, err := sub.Next(ctx)
				require.NoError(t, err)
				n := seqOf(ev.Payload)
				require.True(t, acked[n], "subscriber got payload %d (offset %d), which was never acked", n, ev.Offset)
				require.Equal(t, uint64(delivered), ev.Offset)
			}

			closeErr := h.b.Close()
			require.ErrorIs(t, closeErr, commit.ErrSyncFailed, "Close returns the failure")
			require.ErrorIs(t, closeErr, tc.cause)

			// ... and nothing else before the subscription ends with the broker.
			for {
				ev, err := sub.Next(ctx)
				if err != nil {
					require.NoError(t, ctx.Err(), "the subscription ends when the broker closes")
					break
				}
				t.Fatalf("subscriber got payload %d (offset %d) after the failure; it was never acked", seqOf(ev.Payload), ev.Offset)
			}

			shardDir := filepath.Join(dataDir, segment.ShardDirName("t1", "default", "s", 0))
			image := map[uint64]uint64{}
			for n := range acked {
				image[n] = n // offsets equal payload numbers: one publisher, one shard
			}
			requireAckedInCrashImage(t, fsys, shardDir, t.TempDir(), image)
		})
	}
}

// The reliability issue's disk-full scenario, through the broker: when
// there is no room for the next segment, or for sealing the full one (its
// truncate), publishes to the durable stream are refused with an error
// that says so and never acked, an ephemeral stream on the same broker
// keeps working, and once space returns the same durable stream takes
// publishes again; a subscriber from the earliest offset gets exactly the
// acked records, contiguous. (No space at the seal was terminal until
// restart.)
func TestDurableNoSpaceRefusesThenRecovers(t *testing.T) {
	for _, op := range []faultOp{opPreallocate, opTruncate} {
		t.Run(string(op), func(t *testing.T) { durableNoSpace(t, op) })
	}
}

func durableNoSpace(t *testing.T, op faultOp) {
	fsys := newFaultFS()
	ephemeral := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "e"}, Shards: 1}
	h := serveBroker(t, broker.Config{DataDir: t.TempDir(), Storage: faultStorage(fsys, segment.WriteModeFD)},
		durableSpec("s", "on_commit"), ephemeral)
	ctx := ctxT(t, 60*time.Second)
	c := h.dial(t)
	pub, err := c.NewPublisher(ctx, "default", "s")
	require.NoError(t, err)
	epub, err := c.NewPublisher(ctx, "default", "e")
	require.NoError(t, err)

	var acked []uint64
	next := uint64(0)
	publish := func() error {
		p := make([]byte, 4096)
		binary.BigEndian.PutUint64(p, next)
		next++
		err := pub.Publish(ctx, p)
		if err == nil {
			acked = append(acked, next-1)
		}
		return err
	}
	fsys.setFault(failFrom(op, 1, syscall.ENOSPC)) // the disk is full
	var refusal error
	for range 64 { // 64 KiB segments: a roll comes within 16 publishes
		if refusal = publish(); refusal != nil {
			break
		}
	}
	var be *client.BrokerError
	require.ErrorAs(t, refusal, &be)
	require.Contains(t, be.Message, "no space")
	for range 3 {
		require.ErrorAs(t, publish(), &be, "still full: refused again, not hung")
	}
	require.NoError(t, epub.Publish(ctx, []byte("ephemeral streams keep working")))

	fsys.setFault(nil) // space returns
	for range 40 {     // across more rolls
		require.NoError(t, publish())
	}
	sub, err := h.dial(t).Subscribe(ctx, "default", "s", client.SubscribeOptions{From: client.Earliest()})
	require.NoError(t, err)
	for i, want := range acked {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(i), ev.Offset, "contiguous offsets: a refused publish took none")
		require.Equal(t, want, seqOf(ev.Payload), "only acked records, in order")
	}
}

// faultFS is a segment.FS that injects errors, short writes and ENOSPC into
// chosen file operations and keeps a crash image: the contents each file had
// when a sync of it last succeeded, so a test can prove that nothing was
// acknowledged that a power cut would lose (the idea of pebble's
// vfs/errorfs and MemFS.CrashClone). segment/faultfs_test.go has its own,
// which this package cannot import.
//
// The image is conservative: a file's bytes are copied just before its sync
// starts and kept only if the sync succeeds, so bytes written while a sync
// runs are not counted as durable. Directory entries count as durable once
// their file is synced (SyncDir is not modelled), which is lenient; the
// tests are about record data, not names.
//
// faultOp names a file operation that can fail.
type faultOp string

// The operations a fault function sees.
const (
	opOpen        faultOp = "open"
	opRemove      faultOp = "remove"
	opRename      faultOp = "rename"
	opWrite       faultOp = "write"
	opTruncate    faultOp = "truncate"
	opSync        faultOp = "sync"     // fsync of a file
	opSyncData    faultOp = "syncdata" // fdatasync of a file
	opPreallocate faultOp = "preallocate"
	opMap         faultOp = "map"
	opMsync       faultOp = "msync" // write-back of a mapping range
	opSyncDir     faultOp = "syncdir"
)

// errShortWrite, returned by a fault function for opWrite, makes the write
// store the first half of its bytes and report that count with no error, as
// a short pwrite(2) does.
var errShortWrite = errors.New("faultfs: short write")

// faultFunc decides the fate of one operation on path: nil lets it happen, an
// error fails it before it happens.
type faultFunc func(op faultOp, path string) error

// failFrom returns a fault that fails the n-th call (1-based) of op and
// every later one with err: a disk that broke and stays broken.
func failFrom(op faultOp, n int, err error) faultFunc {
	var mu sync.Mutex
	seen := 0
	return func(o faultOp, _ string) error {
		if o != op {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		seen++
		if seen >= n {
			return err
		}
		return nil
	}
}

// faultFS wraps the operating system's file system (segment.OSFS).
type faultFS struct {
	inner segment.FS
	mu    struct {
		sync.Mutex
		fault faultFunc
		image map[string][]byte // path -> contents at the last successful sync
	}
}

var _ segment.FS = (*faultFS)(nil)

// newFaultFS returns a faultFS with no faults.
func newFaultFS() *faultFS {
	f := &faultFS{inner: segment.OSFS{}}
	f.mu.image = map[string][]byte{}
	return f
}

// setFault installs fn (nil: no faults) for the operations from now on.
func (f *faultFS) setFault(fn faultFunc) {
	f.mu.Lock()
	f.mu.fault = fn
	f.mu.Unlock()
}

func (f *faultFS) check(op faultOp, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.fault == nil {
		return nil
	}
	err := f.mu.fault(op, path)
	if err != nil && !errors.Is(err, errShortWrite) {
		err = &os.PathError{Op: string(op), Path: path, Err: err}
	}
	return err
}

// crashImage writes into dst the crash image of the files directly in dir:
// for each, the contents it had when a sync of it last succeeded. Files
// never synced are absent, as after a power cut.
func (f *faultFS) crashImage(dir, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for path, b := range f.mu.image {
		if filepath.Dir(path) != filepath.Clean(dir) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(path)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// OpenFile implements segment.FS.
func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (segment.File, error) {
	if err := f.check(opOpen, name); err != nil {
		return nil, err
	}
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: filepath.Clean(name)}, nil
}

// Remove implements segment.FS.
func (f *faultFS) Remove(name string) error {
	if err := f.check(opRemove, name); err != nil {
		return err
	}
	if err := f.inner.Remove(name); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.mu.image, filepath.Clean(name))
	f.mu.Unlock()
	return nil
}

// Rename implements segment.FS. The renamed file keeps its crash image.
func (f *faultFS) Rename(oldpath, newpath string) error {
	if err := f.check(opRename, oldpath); err != nil {
		return err
	}
	if err := f.inner.Rename(oldpath, newpath); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
	if b, ok := f.mu.image[oldpath]; ok {
		f.mu.image[newpath] = b
		delete(f.mu.image, oldpath)
	}
	return nil
}

// ReadDir implements segment.FS.
func (f *faultFS) ReadDir(dir string) ([]string, error) { return f.inner.ReadDir(dir) }

// MkdirAll implements segment.FS.
func (f *faultFS) MkdirAll(dir string, perm os.FileMode) error { return f.inner.MkdirAll(dir, perm) }

// SyncDir implements segment.FS.
func (f *faultFS) SyncDir(dir string) error {
	if err := f.check(opSyncDir, dir); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

type faultFile struct {
	segment.File
	fs   *faultFS
	name string
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	switch err := f.fs.check(opWrite, f.name); {
	case errors.Is(err, errShortWrite):
		return f.File.WriteAt(b[:len(b)/2], off)
	case err != nil:
		return 0, err
	}
	return f.File.WriteAt(b, off)
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.check(opTruncate, f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Preallocate(size int64) error {
	if err := f.fs.check(opPreallocate, f.name); err != nil {
		return err
	}
	return f.File.Preallocate(size)
}

func (f *faultFile) Map(size int) (segment.Mapping, error) {
	if err := f.fs.check(opMap, f.name); err != nil {
		return nil, err
	}
	m, err := f.File.Map(size)
	if err != nil {
		return nil, err
	}
	return &faultMapping{Mapping: m, f: f}, nil
}

func (f *faultFile) Sync() error     { return f.synced(opSync, f.File.Sync, 0, -1) }
func (f *faultFile) SyncData() error { return f.synced(opSyncData, f.File.SyncData, 0, -1) }

// synced runs a sync of [off, off+n) (n < 0: the whole file) and, if it
// succeeds, records what that range held when the sync started in the
// file's crash image.
func (f *faultFile) synced(op faultOp, sync func() error, off, n int64) error {
	if err := f.fs.check(op, f.name); err != nil {
		return err
	}
	snap, err := f.contents()
	if err != nil {
		return fmt.Errorf("faultfs: snapshot %s: %w", f.name, err)
	}
	if err := sync(); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if n < 0 {
		f.fs.mu.image[f.name] = snap
		return nil
	}
	img := f.fs.mu.image[f.name]
	if len(img) < len(snap) {
		img = append(img, make([]byte, len(snap)-len(img))...)
	}
	end := min(off+n, int64(len(snap)))
	copy(img[off:end], snap[off:end])
	f.fs.mu.image[f.name] = img
	return nil
}

func (f *faultFile) contents() ([]byte, error) {
	size, err := f.File.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	n, err := f.File.ReadAt(b, 0)
	if err != nil && n != len(b) {
		return nil, err
	}
	return b, nil
}

type faultMapping struct {
	segment.Mapping
	f *faultFile
}

// Sync fails as opMsync; on success only the synced range enters the image.
func (m *faultMapping) Sync(off, n int64) error {
	return m.f.synced(opMsync, func() error { return m.Mapping.Sync(off, n) }, off, n)
}

// A durable stream or cache is recorded in the data directory's catalog
// before it is served: a publish acked before the record, and a crash
// before it, would leave acked records in a stream a restart does not
// reopen.
func TestDurableStreamIsRecordedBeforeItIsServed(t *testing.T) {
	fsys := newFaultFS()
	h := serveBroker(t, broker.Config{DataDir: t.TempDir(), Storage: faultStorage(fsys, segment.WriteModeFD)})
	for _, tc := range []struct {
		name   string
		create func() error
		served func() int
	}{
		{"stream", func() error { return h.b.CreateStream(durableSpec("jobs", "on_commit")) }, func() int { return len(h.b.Streams()) }},
		{"cache", func() error {
			return h.b.CreateCache(broker.CacheSpec{CacheKey: broker.CacheKey{Tenant: "t1", Namespace: "default", Cache: "c"}, Durable: true})
		}, func() int { return len(h.b.Caches()) }},
	} {
		reached, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		fsys.setFault(func(op faultOp, path string) error {
			if op == opRename && strings.Contains(filepath.Base(path), catalogName) {
				once.Do(func() { close(reached); <-release })
			}
			return nil
		})
		done := make(chan error, 1)
		go func() { done <- tc.create() }()
		<-reached
		require.Zero(t, tc.served(), "%s served while its catalog record is being written", tc.name)
		close(release)
		require.NoError(t, <-done)
		require.Equal(t, 1, tc.served(), tc.name)
	}
}

// catalogName is the data directory's catalog (broker's catalogFile).
const catalogName = "streams.json"
