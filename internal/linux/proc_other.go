//go:build !linux

package linux

import (
	"fmt"
	"syscall"
)

// IsNoSuchProcess is false: there is no /proc to race with.
func IsNoSuchProcess(err error) bool { return false }

// SysProcAttrAsUser is Linux-only here.
func SysProcAttrAsUser(uid, gid uint32) (*syscall.SysProcAttr, error) {
	return nil, fmt.Errorf("%w: start a process as another user", ErrNotSupported)
}
