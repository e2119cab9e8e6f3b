package xdsrest

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// A web page can read a REST port on this host or the operator's network
// through the operator's browser: it makes its own name resolve to the
// port's address (DNS rebinding), so that the browser takes the port for
// the page's own origin, or it posts across origins. A browser then sends
// the page's name as Host, and an Origin (or Sec-Fetch-Site) header on
// every poll; Envoy and other xDS clients send neither a public name the
// operator did not choose nor an Origin. The checks below refuse what only
// a browser would send, before anything is read.

// hostError and originError are the refusals' messages.
const (
	hostError = "REST xDS: Host %q is not served here. The REST port answers polls addressed to localhost, an IP address, a name without dots " +
		"(Envoy sends its cluster's name) or a name given with --xds-rest-allowed-host; others are refused so that a web page cannot read it through a browser (DNS rebinding)"
	originError = "REST xDS: a poll from a web page (it carries Origin or Sec-Fetch-Site) is refused: xDS clients send neither, and no page may read a proxy's config"
)

// allowedHosts is a set of lower-case host names.
type allowedHosts map[string]bool

func newAllowedHosts(names []string) allowedHosts {
	a := allowedHosts{}
	for _, n := range names {
		a[strings.ToLower(strings.TrimSpace(n))] = true
	}
	return a
}

// allowed reports whether a request's Host (a name or an address, with or
// without a port) may be served. An IP address and localhost involve no
// DNS a page controls; a name without dots is resolved through the host's
// own search domains, and is what Envoy's REST subscription sends (its
// cluster's name); every public name has a dot, and must be configured.
func (a allowedHosts) allowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	switch {
	case host == "":
		return false
	case a[host], host == "localhost":
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return !strings.Contains(host, ".") && !strings.Contains(host, ":") && !strings.Contains(host, "%")
}

// fromPage reports whether a request comes from a web page: it carries an
// Origin (any, "null" included: the REST port serves no page of its own,
// so even a same-origin request is a rebound page's) or a Sec-Fetch-Site
// other than "none" (the user's own navigation).
func fromPage(r *http.Request) bool {
	if _, ok := r.Header["Origin"]; ok {
		return true
	}
	site, ok := r.Header["Sec-Fetch-Site"]
	return ok && (len(site) != 1 || site[0] != "none")
}
