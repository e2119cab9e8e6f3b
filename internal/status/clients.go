package status

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// Which proxyless gRPC implementations the streams say they are, from the
// node's user_agent_name and user_agent_version, and the warnings that
// come of comparing them with what each group states (`clients:`). Only
// shown: what a group is served never depends on who is connected, and a
// client's word about itself is only its word.

// The implementations, as a group's `clients:` names them (the compile's
// check reads the same names), and Envoy.
const (
	ImplGo    = "grpc-go"
	ImplCore  = "grpc-core"
	ImplJS    = "grpc-js"
	ImplEnvoy = "envoy"
)

// userAgents maps the user_agent_name each implementation sends (read from
// their sources and seen on the wire: grpc-go v1.85 "gRPC Go" with
// grpc.Version; C-core "gRPC C-core <platform>[ <wrapper>]" with "C-core
// <core version>[ <wrapper> <version>]", Debian's python3-grpcio 1.51.1
// sending "gRPC C-core linux Python" and "C-core 29.0.0 Python 1.51.1";
// @grpc/grpc-js-xds "gRPC Node Pure JS" with its own version) to the
// implementation. A prefix of the name, "Agent AgentVersion" as the
// tracker keeps a stream's client.
var userAgents = []struct{ prefix, impl, versionPrefix string }{
	{"gRPC Go ", ImplGo, ""},
	{"gRPC C-core", ImplCore, "C-core "},
	{"gRPC Node Pure JS ", ImplJS, ""},
	{"envoy ", ImplEnvoy, ""},
}

// maxVersion bounds a version as shown: it is the client's word.
const maxVersion = 32

// Implementation reads a stream's client ("user_agent_name
// user_agent_version", Stream.Client) as an implementation and its
// version; "" for a client Pylon does not know.
func Implementation(client string) (impl, version string) {
	for _, u := range userAgents {
		rest, ok := strings.CutPrefix(client, u.prefix)
		if !ok {
			continue
		}
		if u.versionPrefix != "" {
			// The name has a platform and wrapper of its own: the
			// version starts at its prefix.
			if i := strings.Index(rest, " "+u.versionPrefix); i >= 0 {
				rest = rest[i+1+len(u.versionPrefix):]
			} else {
				rest = ""
			}
		}
		return u.impl, printableVersion(rest)
	}
	return "", ""
}

// printableVersion is v as shown: printable ASCII only, bounded.
func printableVersion(v string) string {
	v = strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, strings.TrimSpace(v))
	if len(v) > maxVersion {
		v = v[:maxVersion] + "..."
	}
	return v
}

// maxSeenShown bounds the clients one warning names; the rest are counted.
const maxSeenShown = 5

// ClientWarnings compares the proxyless gRPC clients connected to each
// group of rules (open streams in streams) with the group's `clients:`:
// a group stating none whose proxies include gRPC clients is named with
// the clients seen (its resources are checked against no client's rules),
// and a group stating some is named with each connected client it omits.
// One warning per group at most, in the rules' order, each naming at most
// maxSeenShown clients.
func ClientWarnings(rules nodegroup.Groups, streams []Stream) []string {
	seen := map[string]map[string]struct{}{} // group -> "impl version"
	for _, s := range streams {
		if s.Gone != nil || s.Group == "" || s.Group == NoGroup {
			continue
		}
		impl, version := Implementation(s.Client)
		if impl == "" || impl == ImplEnvoy {
			continue
		}
		if seen[s.Group] == nil {
			seen[s.Group] = map[string]struct{}{}
		}
		seen[s.Group][strings.TrimSpace(impl+" "+version)] = struct{}{}
	}
	var out []string
	for _, g := range rules {
		clients := seen[g.Name]
		if len(clients) == 0 {
			continue
		}
		var omitted []string
		for c := range clients {
			impl, _, _ := strings.Cut(c, " ")
			if !slices.Contains(g.Clients, impl) {
				omitted = append(omitted, c)
			}
		}
		if len(omitted) == 0 {
			continue
		}
		slices.Sort(omitted)
		if len(g.Clients) == 0 {
			out = append(out, fmt.Sprintf("group %q states no clients but proxyless gRPC clients are connected (%s): what it receives is checked against no client's rules; state them with `clients:`", g.Name, list(omitted)))
			continue
		}
		verb := "is"
		if len(omitted) > 1 {
			verb = "are"
		}
		out = append(out, fmt.Sprintf("group %q states clients [%s] but %s %s connected: what it receives is not checked against what those accept; add them to `clients:`", g.Name, strings.Join(g.Clients, ", "), list(omitted), verb))
	}
	return out
}

// list names the first maxSeenShown of names and counts the rest.
func list(names []string) string {
	if len(names) <= maxSeenShown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxSeenShown], ", "), len(names)-maxSeenShown)
}
