package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// A durable cache's log gets a record per change, so it outgrows the live
// entries. It is compacted when the cache opens (no writer runs yet):
// after the rebuild, if the log holds more than compactMinRecords records
// and more than compactRatio records per live entry, the live entries are
// written, least recently used first (so a rebuild restores the LRU order),
// to a new log in DIR.compact whose offsets continue where the old log
// ended (revisions never go back), synced, and swapped in:
//
//	rename DIR -> DIR.old; rename DIR.compact -> DIR; sync the parent; remove DIR.old
//
// recoverCompaction, run before every open, finishes or undoes a swap a
// crash interrupted: DIR.compact without DIR.old is unfinished (removed);
// DIR.old with DIR present is finished (DIR.old removed); DIR.old without
// DIR means the crash fell between the renames (DIR.old is put back).
const (
	compactMinRecords = 4096
	compactRatio      = 2
)

func needsCompaction(records uint64, entries int) bool {
	return records > compactMinRecords && records > compactRatio*uint64(max(entries, 1))
}

func recoverCompaction(dir string) error {
	tmp, old := dir+".compact", dir+".old"
	_, errDir := os.Stat(dir)
	_, errOld := os.Stat(old)
	switch {
	case errOld == nil && errors.Is(errDir, fs.ErrNotExist):
		if err := os.Rename(old, dir); err != nil {
			return err
		}
	case errOld == nil:
		if err := os.RemoveAll(old); err != nil {
			return err
		}
	}
	return os.RemoveAll(tmp)
}

// compactTo writes the store's live entries as a new log continuing at
// base and swaps it in for dir. It runs while the cache opens, before
// anything else can reach it (so without mu); the cache's own log must be
// closed.
func (c *cache) compactTo(dir string, scfg segment.Config, base uint64) error {
	tmp, old := dir+".compact", dir+".old"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	scfg.BaseOffset = base
	l, err := segment.Open(tmp, scfg)
	if err != nil {
		return err
	}
	err = c.writeEntries(l)
	if err == nil {
		err = l.Sync()
	}
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("compacting %s: %w", dir, err)
	}
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// writeEntries appends one record per entry, oldest first, in batches
// (while the cache opens, as compactTo).
func (c *cache) writeEntries(l *segment.Log) error {
	var batch [][]byte
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := l.Append(batch, 0)
		batch = batch[:0]
		return err
	}
	for _, rec := range c.mu.store.liveRecords() {
		p, err := wire.AppendCacheRecord(nil, rec)
		if err != nil {
			return err
		}
		if batch = append(batch, p); len(batch) == 256 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
