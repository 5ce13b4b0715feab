package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// saveCatalog replaces the catalog atomically: write a temporary file, sync
// it, rename it over the old one, sync the directory.
func saveCatalog(dir string, c catalog) error {
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, catalogFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(raw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, catalogFile))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
