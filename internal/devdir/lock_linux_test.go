//go:build linux

package devdir

const linuxLocks = true
