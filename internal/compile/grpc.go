package compile

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/translate"
)

// What proxyless gRPC clients accept, checked before they could NACK it.
// The rules follow grpc-go v1.85.0's RDS parser
// (internal/xds/xdsclient/xdsresource/unmarshal_rds.go) and resolver
// (internal/xds/resolver), which implement gRFC A28 (routing) and A44
// (retries); where grpc-go would accept something that can never take
// effect (a header it removes before matching, a retry code it ignores),
// Pylon refuses it too, since a rule that silently does nothing is the
// outage nobody can find.

const grpcKind = "grpc target"

// grpcRetryCodes are the status codes a gRPC retry policy may name, as
// grpc-go's generateRetryConfig reads them; it ignores any other value.
var grpcRetryCodes = []string{"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}

// MaxGRPCRetries is the most retries a route may ask for: gRPC clients cap
// an RPC at 5 attempts by default (grpc-go's grpc.WithMaxCallAttempts,
// gRFC A6), so more would be cut silently.
const MaxGRPCRetries = 4

// MaxGRPCRoutes bounds the routes of one target: a client tries them in
// order on every RPC.
const MaxGRPCRoutes = 1000

// grpcTarget checks a gRPC target: its default services, its routes, and
// the retry policy routes inherit.
func (c *checker) grpcTarget(g *model.GRPCTarget) {
	if len(g.To) == 0 && len(g.Routes) == 0 {
		c.add(g.Source, grpcKind, g.Target, "to", "missing: the services the target sends RPCs to (to, or routes)")
	}
	if len(g.To) > 0 {
		c.targets(g.Source, grpcKind, g.Target, "to", g.To)
	}
	if len(g.Routes) > MaxGRPCRoutes {
		c.add(g.Source, grpcKind, g.Target, "routes", "%d routes, over the limit of %d (clients try them in order on every RPC)", len(g.Routes), MaxGRPCRoutes)
		return
	}
	c.grpcRetries(g, "retries", g.Retries)
	if g.Hash != nil {
		c.grpcHash(g, "hash", g.Hash, g.To)
	}
	c.grpcFault(g, "fault", g.Fault)
	for i := range g.Routes {
		r := &g.Routes[i]
		f := fmt.Sprintf("routes[%d]", i)
		if len(r.To) == 0 {
			c.add(g.Source, grpcKind, g.Target, f+".to", "missing: the services this route sends RPCs to")
		}
		c.targets(g.Source, grpcKind, g.Target, f+".to", r.To)
		c.grpcMatch(g, f+".match", &r.Match)
		c.grpcRetries(g, f+".retries", r.Retries)
		c.grpcFault(g, f+".fault", r.Fault)
		if r.Hash != nil {
			c.grpcHash(g, f+".hash", r.Hash, r.To)
		} else if g.Hash != nil {
			c.grpcHash(g, f+".to", nil, r.To)
		}
	}
}

// grpcFault checks a fault (gRFC A33): a delay above zero, a status code
// by name, shares in percent.
func (c *checker) grpcFault(g *model.GRPCTarget, field string, f *model.GRPCFault) {
	if f == nil {
		return
	}
	bad := func(f, format string, args ...any) { c.add(g.Source, grpcKind, g.Target, f, format, args...) }
	if f.Delay == nil && f.Abort == nil {
		bad(field, "needs delay, abort or both")
	}
	if d := f.Delay; d != nil {
		if d.Delay == nil || d.Delay.Std() <= 0 {
			bad(field+".delay.delay", "missing: how long to hold the RPCs, above zero")
		}
		if d.Percent != nil && *d.Percent > 100 {
			bad(field+".delay.percent", "%d: a percentage, at most 100", *d.Percent)
		}
	}
	if a := f.Abort; a != nil {
		if _, ok := translate.GRPCStatusCodes[a.Status]; !ok {
			bad(field+".abort.status", "%q is not a gRPC status code (one of %v, lowercase)", a.Status, slices.Sorted(maps.Keys(translate.GRPCStatusCodes)))
		}
		if a.Percent != nil && *a.Percent > 100 {
			bad(field+".abort.percent", "%d: a percentage, at most 100", *a.Percent)
		}
	}
}

// grpcHash checks a hash policy (field is where it is written) and that
// the services it applies to balance by ring hash: under any other policy
// a client computes the hash and never reads it, the outage nobody can
// find. A nil h checks only the services, for a route that inherits the
// target's.
func (c *checker) grpcHash(g *model.GRPCTarget, field string, h *model.GRPCHash, to []model.Target) {
	bad := func(f, format string, args ...any) { c.add(g.Source, grpcKind, g.Target, f, format, args...) }
	if h != nil {
		name := strings.ToLower(h.Header)
		switch {
		case (h.Header != "") == h.Channel:
			bad(field, "needs exactly one of header and channel: true")
		case strings.HasPrefix(name, ":"):
			bad(field+".header", "%q is a pseudo-header, which is not in an RPC's metadata", h.Header)
		case strings.HasSuffix(name, "-bin"):
			bad(field+".header", "%q: gRPC clients skip binary (-bin) metadata when hashing, so every RPC would hash at random", h.Header)
		}
	}
	for _, t := range to {
		if s := c.services[t.Service]; s != nil && s.LB != "ring_hash" {
			bad(field, "service %q balances by %s, which reads no hash; say lb: ring_hash on the service", s.Name, cmp.Or(s.LB, "round_robin"))
		}
	}
}

// grpcMatch checks a route's match on the method path and metadata.
func (c *checker) grpcMatch(g *model.GRPCTarget, field string, m *model.GRPCMatch) {
	bad := func(f, format string, args ...any) { c.add(g.Source, grpcKind, g.Target, f, format, args...) }
	specs := 0
	for _, set := range []bool{m.Prefix != nil, m.Path != "", m.Regex != ""} {
		if set {
			specs++
		}
	}
	if specs > 1 {
		bad(field, "at most one of prefix, path and regex")
	}
	// gRPC matches against the method path, "/package.Service/Method".
	if m.Prefix != nil && *m.Prefix != "" && !strings.HasPrefix(*m.Prefix, "/") {
		bad(field+".prefix", "%q matches no RPC: method paths start with /, e.g. /%s", *m.Prefix, strings.TrimLeft(*m.Prefix, "/"))
	}
	if m.Path != "" && !isMethodPath(m.Path) {
		bad(field+".path", "%q is not a method path: write /package.Service/Method", m.Path)
	}
	if m.Regex != "" {
		// grpc-go compiles it with Go's regexp (matcher.CompileSafeRegex)
		// and matches the whole path.
		if msg := snapshot.RegexProblem(m.Regex); msg != "" {
			bad(field+".regex", "%s", msg)
		}
	}
	for k, h := range m.Headers {
		c.grpcHeader(g, fmt.Sprintf("%s.headers[%d]", field, k), h)
	}
}

// isMethodPath reports whether p is "/service/method" with both parts set.
func isMethodPath(p string) bool {
	service, method, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return strings.HasPrefix(p, "/") && ok && service != "" && method != "" && !strings.Contains(method, "/")
}

// grpcHeader checks one metadata matcher. gRPC matches headers against the
// RPC's metadata, not HTTP/2 headers: pseudo-headers are not in it,
// grpc-go removes binary (-bin) entries before matching (resolver
// SelectConfig), and grpc- names are the library's own (gRFC A28).
func (c *checker) grpcHeader(g *model.GRPCTarget, field string, h model.HeaderMatch) {
	bad := func(f, format string, args ...any) { c.add(g.Source, grpcKind, g.Target, f, format, args...) }
	name := strings.ToLower(h.Name)
	switch {
	case name == "":
		bad(field+".name", "missing")
	case strings.HasPrefix(name, ":"):
		bad(field+".name", "%q is a pseudo-header, which gRPC clients do not match on; match the method with match.path, prefix or regex", h.Name)
	case strings.HasPrefix(name, "grpc-"):
		bad(field+".name", "%q: grpc- headers belong to the gRPC library, which does not match routes on them", h.Name)
	case strings.HasSuffix(name, "-bin"):
		bad(field+".name", "%q: gRPC clients drop binary (-bin) metadata before matching routes, so this would never match", h.Name)
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

// grpcRetries checks a retry policy as grpc-go's generateRetryConfig
// would: it NACKs num_retries below 1 and a zero base or max interval, and
// ignores retry codes it does not know (with none known, it does not retry
// at all).
func (c *checker) grpcRetries(g *model.GRPCTarget, field string, r *model.GRPCRetries) {
	if r == nil {
		return
	}
	bad := func(f, format string, args ...any) { c.add(g.Source, grpcKind, g.Target, f, format, args...) }
	if len(r.On) == 0 {
		bad(field+".on", "missing: the status codes to retry on, some of %v", grpcRetryCodes)
	}
	for i, code := range r.On {
		if !slices.Contains(grpcRetryCodes, code) {
			bad(fmt.Sprintf("%s.on[%d]", field, i), "%q is not one of %v (the codes gRPC clients retry on, written in lowercase)", code, grpcRetryCodes)
		}
	}
	if r.NumRetries > MaxGRPCRetries {
		bad(field+".num_retries", "%d is over %d: gRPC clients cap an RPC at 5 attempts and would cut it silently", r.NumRetries, MaxGRPCRetries)
	}
	if r.BaseInterval != nil && r.BaseInterval.Std() == 0 {
		bad(field+".base_interval", "must be above zero (gRPC clients reject zero)")
	}
	if r.MaxInterval != nil && r.MaxInterval.Std() == 0 {
		bad(field+".max_interval", "must be above zero (gRPC clients reject zero)")
	}
	base := translate.DefaultGRPCRetryBase
	if r.BaseInterval != nil {
		base = r.BaseInterval.Std()
	}
	if r.MaxInterval != nil && r.MaxInterval.Std() > 0 && r.MaxInterval.Std() < base {
		bad(field+".max_interval", "%v is below the base interval %v", r.MaxInterval.Std(), base)
	}
}

// checkWeights refuses a split whose weights sum past what a uint32 holds:
// grpc-go NACKs it ("total weight of clusters exceeds MaxUint32"), and so
// does Envoy.
func checkWeights(to []model.Target) string {
	var total uint64
	for _, t := range to {
		total += uint64(t.Weight)
	}
	if total > math.MaxUint32 {
		return fmt.Sprintf("the weights sum to %d, over %d", total, uint64(math.MaxUint32))
	}
	return ""
}
