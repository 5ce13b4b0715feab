//go:build !linux

package devdir

const linuxLocks = false
