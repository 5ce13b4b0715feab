package linux

import "syscall"

// RawConn is syscall.RawConn, re-exported so that packages outside this shim
// can name the type in method signatures (quic.OOBCapablePacketConn's
// SyscallConn) without importing syscall themselves. It is an alias: a
// method returning RawConn has exactly the signature quic-go asserts.
type RawConn = syscall.RawConn
