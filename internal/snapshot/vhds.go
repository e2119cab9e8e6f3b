package snapshot

import (
	"fmt"
	"sort"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// VirtualHostNamespace splits a VHDS name, "<route configuration>/<rest>",
// at its last "/": Envoy's namespace matching (use_namespace_matching)
// reads the namespace so, and a host header never holds a "/". ok is false
// for a name without a namespace.
func VirtualHostNamespace(name string) (routeConfig, rest string, ok bool) {
	i := strings.LastIndexByte(name, '/')
	if i <= 0 || i == len(name)-1 {
		return "", "", false
	}
	return name[:i], name[i+1:], true
}

// vhdsProblems checks the VirtualHost resources (VHDS) against the route
// configurations they extend. Envoy asks for a route configuration's
// virtual hosts under its name ("<route configuration>/<host>") and keys
// them by VirtualHost.name, so a virtual host must be named
// "<route configuration>/<virtual host>", that route configuration must
// exist and turn VHDS on (`vhds`; without it Envoy never asks), and no
// domain may be served twice within it: Envoy refuses a route
// configuration with a duplicate domain, whichever virtual host brings it.
func vhdsProblems(inputs []xdstype.Resource, firstSeen map[string]map[string]*xdstype.Resource, byType map[string]map[string]*Resource) diag.List {
	var out diag.List
	// domains: per route configuration, each lowercased domain and which
	// virtual host serves it; the inline ones are entered first.
	domains := map[string]map[string]string{}
	for i := range inputs {
		in := &inputs[i]
		if in.Type.URL != xdstype.VirtualHostURL || firstSeen[in.Type.URL][in.Name] != in {
			continue
		}
		vh, _ := in.Message.(*routev3.VirtualHost)
		if vh.GetName() != in.Name {
			out = append(out, diagOf(in, "name", "a VirtualHost's resource name must be its name %q", vh.GetName()))
			continue
		}
		rcName, _, ok := VirtualHostNamespace(in.Name)
		if !ok {
			out = append(out, diagOf(in, "name", "a VirtualHost is named \"<route configuration>/<virtual host>\" (VHDS): %q has no route configuration before a \"/\"", in.Name))
			continue
		}
		r := byType[xdstype.RouteURL][rcName]
		if r == nil {
			out = append(out, diagOf(in, "name", "names RouteConfiguration %q (the part before the last \"/\"), which does not exist", rcName))
			continue
		}
		rc, _ := r.Message.(*routev3.RouteConfiguration)
		if rc.GetVhds() == nil {
			out = append(out, diagOf(in, "name", "RouteConfiguration %q has no vhds: Envoy never asks for its virtual hosts", rcName))
			continue
		}
		seen := domains[rcName]
		if seen == nil {
			seen = map[string]string{}
			for _, inline := range rc.GetVirtualHosts() {
				for _, d := range inline.GetDomains() {
					seen[ASCIILower(d)] = fmt.Sprintf("RouteConfiguration %q's virtual host %q", rcName, inline.GetName())
				}
			}
			domains[rcName] = seen
		}
		for j, d := range vh.GetDomains() {
			lower := ASCIILower(d)
			if other, dup := seen[lower]; dup {
				out = append(out, diagOf(in, fmt.Sprintf("domains[%d]", j), "domain %q is served by %s too: Envoy rejects a route configuration with a duplicate domain", d, other))
				continue
			}
			seen[lower] = fmt.Sprintf("VirtualHost %q", in.Name)
		}
	}
	return out
}

// VirtualHostsOf returns the names in set (of VirtualHosts) in the
// namespace of the route configuration rc, sorted: a binary search in the
// set's sorted names.
func VirtualHostsOf(set *Set, rc string) []string {
	return VirtualHostsIn(set.Names(), rc)
}

// VirtualHostsIn is VirtualHostsOf over sorted VirtualHost names.
func VirtualHostsIn(names []string, rc string) []string {
	prefix := rc + "/"
	var out []string
	for i := sort.SearchStrings(names, prefix); i < len(names) && strings.HasPrefix(names[i], prefix); i++ {
		if !strings.Contains(names[i][len(prefix):], "/") {
			out = append(out, names[i])
		}
	}
	return out
}

// ASCIILower lowercases A-Z only, as Envoy compares domains
// (absl::AsciiStrToLower): strings.ToLower would also fold other letters
// (the Kelvin sign into "k") and call two domains one that Envoy keeps
// apart. It allocates only when something changes.
func ASCIILower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
