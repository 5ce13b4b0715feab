// Package udp is the UDP socket Felix runs quic-go on: batched receive
// (recvmmsg), UDP GRO aggregates split at the segment size from the kernel's
// control message, quic-go's own GSO and ECN sends passed through, socket
// buffers sized with one warning when the kernel clamps, per-socket
// counters, the per-platform MTU policy, and a connection-stats recorder
// for quic-go's qlog events.
//
// It must not parse QUIC (docs/design.md, "Packages"): it moves datagrams and
// control messages, and reads only the UDP_GRO / UDP_SEGMENT sizes.
//
// # How quic-go uses a Conn
//
// Hand a *Conn to quic.Transport{Conn: c}. Because Conn implements all of
// quic.OOBCapablePacketConn plus ReadBatch, quic-go (v0.65) enables DF (path
// MTU discovery), ECN, PKTINFO and GSO through SyscallConn — the real
// socket's RawConn — and does all its reads through ReadBatch, 8 messages
// of 1452 bytes at a time, on its single read goroutine. Check
// quic.Conn.ConnectionState().GSO to catch a silent fall-back.
//
// # Switching GSO off
//
// quic-go decides GSO once per Transport, from the QUIC_GO_DISABLE_GSO
// environment variable and a getsockopt(UDP_SEGMENT) on the fd, which
// always succeeds on Linux ≥ 5. A conn has no honest way to make that probe
// fail: SyscallConn must return the real socket (quic-go sets DF, RECVTOS
// and PKTINFO through it) and a wrapped RawConn cannot tell which option a
// Control callback touches. The other lever, failing UDP_SEGMENT writes
// with EIO so that quic-go's per-connection fallback (send_conn.go) turns
// GSO off, works but trips a data race inside quic-go v0.65 (sconn's
// gotGSOError is written by the send queue and read by the connection's
// run loop; go test -race reports it), so it is not used.
//
// So: FELIX_UDP_GSO=false is two things. The binary sets
// QUIC_GO_DISABLE_GSO=true before creating any Transport — that is the
// only way quic-go sees no GSO — and passes Config.DisableGSO, with which
// WriteMsgUDP sends any UDP_SEGMENT batch that still arrives one packet per
// sendmsg (Stats().GSOSplit counts them), so the kernel never sees GSO
// either way.
//
// # Concurrency
//
// ReadBatch, ReadFrom and ReadMsgUDP are for one goroutine at a time
// (quic-go's read loop). Writes, Stats, deadlines and Close are safe from
// any goroutine. With Config.Reader a pinned goroutine owned by the Conn
// does the recvmmsg; Close stops it and waits. Locks: one mutex per Conn
// (the handoff-mode deadline) and a package sync.Once for the warning.
//
// # Platforms
//
// Linux: recvmmsg(2) through a reused argument vector (internal/linux
// Mmsg; ipv4.Message stays the API quic-go calls with), UDP_GRO, UDP_SEGMENT, the
// SO_RCVBUFFORCE / SO_SNDBUFFORCE retry when root. Elsewhere: one
// ReadMsgUDP per datagram, no GRO, no GSO (quic-go never asks for it off
// Linux), socket buffers set but not read back; the counters count what
// happened and nothing else.
package udp
