// Package netaddr answers questions about listen addresses that the
// binaries' knob checks and the broker's own configuration check both ask.
// It imports nothing of the project.
package netaddr

import "net"

// Loopback reports whether a listen address ("host:port") accepts local
// peers only: localhost or a loopback IP. An empty host, a wildcard or any
// other name listens beyond the machine; a malformed address is not
// loopback.
func Loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
