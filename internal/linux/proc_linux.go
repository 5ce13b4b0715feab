//go:build linux

package linux

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// IsNoSuchProcess reports whether err is ESRCH, which reading
// /proc/PID/task/TID/stat returns once the task has exited but before its
// directory is gone (fs/proc/base.c proc_single_show).
func IsNoSuchProcess(err error) bool { return errors.Is(err, unix.ESRCH) }

// SysProcAttrAsUser returns attributes that make os/exec start a child as
// uid and gid with no supplementary groups, so that tests run as root can
// prove what an unprivileged user gets.
func SysProcAttrAsUser(uid, gid uint32) (*syscall.SysProcAttr, error) {
	return &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}},
	}, nil
}
