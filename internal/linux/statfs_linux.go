//go:build linux

package linux

import "golang.org/x/sys/unix"

// DiskSpace is statfs(2) of the file system holding path: the bytes an
// unprivileged writer may still use, and its size.
func DiskSpace(path string) (avail, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// MountTracefs mounts tracefs at dir (mount -t tracefs nodev dir), which
// the eBPF tracepoint probes read; it needs CAP_SYS_ADMIN.
func MountTracefs(dir string) error {
	return unix.Mount("nodev", dir, "tracefs", 0, "")
}
