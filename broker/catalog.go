package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/felixmq/felix/segment"
)

// catalogFile lists the durable streams and caches of a data directory, so that a
// restarted broker reopens (and recovers) their logs without being told
// again. Until the control plane owns stream metadata this file does.
const catalogFile = "streams.json"

type catalog struct {
	Streams []StreamSpec `json:"streams"`
	Caches  []CacheSpec  `json:"caches,omitempty"`
}

func loadCatalog(dir string) (catalog, error) {
	var c catalog
	raw, err := os.ReadFile(filepath.Join(dir, catalogFile))
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("broker: %s: %w", filepath.Join(dir, catalogFile), err)
	}
	return c, nil
}

// saveCatalog replaces the catalog atomically and durably, through fsys
// (the storage's file system, so fault injection reaches it too).
func saveCatalog(fsys segment.FS, dir string, c catalog) error {
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return segment.WriteFileAtomic(fsys, filepath.Join(dir, catalogFile), raw)
}
