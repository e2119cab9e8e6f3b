package compile

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/snapshot"
)

// Bounds on a server's RBAC: its servers test every RPC against it.
const (
	MaxGRPCPolicies    = 100 // per side, allow or deny
	MaxGRPCPolicyItems = 100 // principals, methods or headers of a policy
)

// grpcServer checks a target's xDS-enabled servers (gRFC A36) as grpc-go
// reads their Listener: an IP address and port, as a server names the
// Listener it fetches (a host name would name one no server asks for),
// and RBAC policies grpc-go accepts (gRFC A41).
func (c *checker) grpcServer(g *model.GRPCTarget, listens map[string]*model.GRPCTarget) {
	s := g.Server
	if s == nil {
		return
	}
	bad := func(f, format string, args ...any) { c.add(g.Source, grpcKind, g.Target, f, format, args...) }
	if msg := listenProblem(s.Listen); msg != "" {
		bad("server.listen", "%s", msg)
	} else if other := listens[s.Listen]; other != nil {
		bad("server.listen", "%s: the servers of grpc target %q (%s:%d) listen there already; a server fetches one Listener for its address", s.Listen, other.Target, other.Source.File, other.Source.Line)
	} else {
		listens[s.Listen] = g
	}
	if t := s.TLS; t != nil {
		for f, v := range map[string]string{"certificates": t.Certificates, "ca": t.CA} {
			if strings.TrimSpace(v) != v {
				bad("server.tls."+f, "%q: a certificate provider instance's name, without spaces", v)
			}
		}
	}
	if r := s.RBAC; r != nil {
		if len(r.Allow) == 0 && len(r.Deny) == 0 {
			bad("server.rbac", "needs allow, deny or both: the policies that admit or refuse RPCs")
		}
		mtls := s.TLS != nil && (s.TLS.RequireClientCertificate == nil || *s.TLS.RequireClientCertificate)
		c.grpcPolicies(g, "server.rbac.allow", r.Allow, mtls)
		c.grpcPolicies(g, "server.rbac.deny", r.Deny, mtls)
	}
}

// listenProblem says what is wrong with a server's address, or "".
func listenProblem(listen string) string {
	if listen == "" {
		return "missing: the address and port the servers listen on, e.g. 0.0.0.0:50051"
	}
	ap, err := netip.ParseAddrPort(listen)
	if err != nil {
		return fmt.Sprintf("%q is not an IP address and port (e.g. 0.0.0.0:50051, [::]:50051): a server names its Listener by the address it listens on", listen)
	}
	if ap.Port() == 0 {
		return fmt.Sprintf("%q: port 0 is picked at random by the system; say the port", listen)
	}
	if ap.String() != listen {
		// grpc-go names the Listener by net.Addr's String().
		return fmt.Sprintf("%q: write it as %s, the way the servers name their Listener", listen, ap)
	}
	return ""
}

// grpcPolicies checks one side's RBAC policies. A principal needs mutual
// TLS: without a verified client certificate grpc-go matches no principal
// but "" (gRFC A41), so a policy by caller would admit or refuse nobody by
// who they are.
func (c *checker) grpcPolicies(g *model.GRPCTarget, field string, ps []model.GRPCPolicy, mtls bool) {
	bad := func(f, format string, args ...any) { c.add(g.Source, grpcKind, g.Target, f, format, args...) }
	if len(ps) > MaxGRPCPolicies {
		bad(field, "%d policies, over the limit of %d", len(ps), MaxGRPCPolicies)
		return
	}
	names := map[string]int{}
	for i := range ps {
		p := &ps[i]
		pf := fmt.Sprintf("%s[%d]", field, i)
		if p.Name == "" {
			bad(pf+".name", "missing: grpc-go names it when it refuses an RPC")
		} else if j, dup := names[p.Name]; dup {
			bad(pf+".name", "%q again: already %s[%d]'s name", p.Name, field, j)
		} else {
			names[p.Name] = i
		}
		if max(len(p.Principals), len(p.Methods), len(p.Headers)) > MaxGRPCPolicyItems {
			bad(pf, "over %d principals, methods or headers", MaxGRPCPolicyItems)
			continue
		}
		if len(p.Principals)+len(p.Methods)+len(p.Headers) == 0 {
			// A policy of nothing matches every RPC: an allow that admits
			// everybody (an empty list rendered by a template, say) or a
			// deny that refuses everybody, never what was meant.
			bad(pf, "names no principals, methods or headers, so it would match every RPC: say whom it is for (principals: [\"*\"] for any caller with a certificate)")
		}
		if len(p.Principals) > 0 && !mtls {
			bad(pf+".principals", "a caller is known by its certificate: say server.tls (client certificates required) for principals to match")
		}
		for j, id := range p.Principals {
			if id == "" || strings.TrimSpace(id) != id || strings.Contains(strings.TrimSuffix(id, "*"), "*") {
				bad(fmt.Sprintf("%s.principals[%d]", pf, j), "%q: an identity (spiffe://example.org/ns/apps/sa/caller), a prefix ending in * (spiffe://example.org/ns/apps/*), or * for any caller with a certificate", id)
			}
		}
		for j, m := range p.Methods {
			if !isMethodPath(m) && !isServiceWildcard(m) {
				bad(fmt.Sprintf("%s.methods[%d]", pf, j), "%q: write /package.Service/Method, or /package.Service/* for every method of a service", m)
			}
		}
		for j, h := range p.Headers {
			c.rbacHeader(g, fmt.Sprintf("%s.headers[%d]", pf, j), h)
		}
	}
}

// isServiceWildcard reports whether m is "/package.Service/*".
func isServiceWildcard(m string) bool {
	service, ok := strings.CutSuffix(m, "/*")
	return ok && strings.HasPrefix(service, "/") && len(service) > 1 && !strings.Contains(service[1:], "/") && !strings.Contains(service, "*")
}

// rbacHeader checks a policy's metadata matcher as grpc-go's RBAC filter
// does: it NACKs grpc- names and :scheme (gRFC A41).
func (c *checker) rbacHeader(g *model.GRPCTarget, field string, h model.HeaderMatch) {
	bad := func(f, format string, args ...any) { c.add(g.Source, grpcKind, g.Target, f, format, args...) }
	name := strings.ToLower(h.Name)
	switch {
	case name == "":
		bad(field+".name", "missing")
	case name == ":scheme" || strings.HasPrefix(name, "grpc-"):
		bad(field+".name", "%q: gRPC servers refuse RBAC on :scheme and grpc- headers", h.Name)
	}
	specs := 0
	for _, set := range []bool{h.Exact != "", h.Prefix != "", h.Regex != "", h.Present} {
		if set {
			specs++
		}
	}
	if specs != 1 {
		bad(field, "needs exactly one of exact, prefix, regex and present: true")
	}
	if h.Regex != "" {
		if msg := snapshot.RegexProblem(h.Regex); msg != "" {
			bad(field+".regex", "%s", msg)
		}
	}
}
