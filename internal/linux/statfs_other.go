//go:build !linux

package linux

import "fmt"

// DiskSpace is not available here: the broker exports no disk gauges.
func DiskSpace(path string) (avail, total uint64, err error) {
	return 0, 0, fmt.Errorf("%w: statfs", ErrNotSupported)
}

// MountTracefs is Linux's.
func MountTracefs(dir string) error {
	return fmt.Errorf("%w: tracefs", ErrNotSupported)
}
