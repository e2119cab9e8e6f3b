// Package loopback says whether an address is reachable only from this
// host: the server decides by it whether a port may serve without TLS,
// and the admin API's clients whether a token may go in clear.
package loopback

import (
	"net"
	"strings"
)

// Is reports whether a listener's address (host:port) is reachable
// only from this host. An empty host (":18000"), 0.0.0.0 and [::] are every
// interface; a name other than localhost is not trusted to stay local.
func Is(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && Host(host)
}

// Host reports whether host, without a port (a URL's Hostname), is this
// host only: a loopback address or localhost.
func Host(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	// A zone ("fe80::1%eth0") is never loopback; ParseIP refuses it.
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
