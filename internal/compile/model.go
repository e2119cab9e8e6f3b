package compile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/secretfile"
	"github.com/pylon-xds/pylon/internal/translate"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// ReadFile reads a file a config names (a certificate, a key). A path is
// joined to its config file's Dir when that is set and the path is
// relative; otherwise it is passed as written. Use secretfile.Reader.Read
// to confine reads to secret directories.
type ReadFile func(path string) ([]byte, error)

// checker collects the model's mistakes, each naming file, object and field.
type checker struct {
	problems diag.List
	services map[string]*model.Service
	tables   map[string]*model.RouteTable
	secrets  map[string]*model.Secret
	// dirs maps a config file's path to its Dir (config.File.Dir).
	dirs map[string]string
	// joined: where the endpoints that end each service's list were
	// written (config.Document.Joined).
	joined map[string][]model.Source
	// deps, when set, collects the facts of other objects the checks
	// read (checkedAs).
	deps *[]dep
}

// endpointProblem reports a problem of s's i-th endpoint (sub: the field
// under it, ".port"), at the service for its own endpoints and at the
// endpoints list's item for one that joined it.
func (c *checker) endpointProblem(s *model.Service, i int, sub, format string, args ...any) {
	joined := c.joined[s.Name]
	own := len(s.Endpoints) - len(joined)
	if i < own {
		c.add(s.Source, "service", s.Name, fmt.Sprintf("endpoints[%d]%s", i, sub), format, args...)
		return
	}
	c.add(joined[i-own], "endpoint", s.Name, strings.TrimPrefix(sub, "."), format, args...)
}

// endpointName names s's j-th endpoint in a message about its i-th.
func (c *checker) endpointName(s *model.Service, i, j int) string {
	joined := c.joined[s.Name]
	own := len(s.Endpoints) - len(joined)
	switch {
	case j < own && i < own:
		return fmt.Sprintf("endpoints[%d]", j)
	case j < own:
		return fmt.Sprintf("the service's endpoints[%d]", j)
	}
	src := joined[j-own]
	return fmt.Sprintf("the endpoint at %s:%d", src.File, src.Line)
}

func (c *checker) add(src model.Source, kind, name, field, format string, args ...any) {
	c.problems = append(c.problems, diag.Diagnostic{File: src.File, Line: src.Line, Type: kind, Name: name, Field: field, Message: fmt.Sprintf(format, args...)})
}

// ref checks that name is one of known, suggesting the closest on a miss.
func ref[T any](c *checker, src model.Source, kind, owner, field, what, name string, known map[string]T) bool {
	c.record(what, name)
	if _, ok := known[name]; ok {
		return true
	}
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	msg := fmt.Sprintf("no %s %q", what, name)
	if s := suggest(name, names); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	c.add(src, kind, owner, field, "%s", msg)
	return false
}

// oneOf reports value when it is set and not one of allowed().
func oneOf(c *checker, src model.Source, kind, name, field, value string, allowed func() []string) {
	if value == "" {
		return // the default: the list is not even made, for every service
	}
	if list := allowed(); !slices.Contains(list, value) {
		c.add(src, kind, name, field, "%q is not one of %v", value, list)
	}
}

// objKind is a kind of model object that translates into resources, in
// the order a whole compile translates (and reports on) them.
type objKind uint8

const (
	objService objKind = iota
	objTable
	objListener
	objSecret
	objGRPC
	objKinds
)

// modelTranslator checks a model and translates it into inputs for the
// snapshot builder, reading the secret files it names. It takes the
// objects one at a time, each once, on demand: a whole compile asks for
// all of them (all), a shard for those its groups reach (reach.go). What
// comes out is in the model's order whatever the order of the asking
// (emit), so the two agree on what they both translate.
type modelTranslator struct {
	reg          *xdstype.Registry
	m            *model.Model
	ids          config.Identities
	c            *checker
	st           *serviceTranslator
	read         ReadFile
	files        map[string][]byte
	grpcServices map[string]bool
	listens      map[string]*model.GRPCTarget
	// tables: a route table's index by name, for a listener asking
	// whether one rate limits before it was translated.
	tables      map[string]int
	rateLimited map[string]bool
	// global: the problems of the model as a whole (duplicate names).
	global diag.List
	holds  map[reflect.Type]bool // the durations check's memo
	out    [objKinds][]objOut    // by kind and index
}

// objOut is one object's translation and the problems found in it: its
// negative durations, reported before any object's other problems, and
// the others.
type objOut struct {
	done      bool // translated
	inputs    []xdstype.Resource
	durations diag.List
	problems  diag.List
}

func newModelTranslator(reg *xdstype.Registry, doc *config.Document, read ReadFile, dirs map[string]string, services *serviceTranslator) *modelTranslator {
	m := &doc.Model
	c := &checker{services: make(map[string]*model.Service, len(m.Services)), tables: make(map[string]*model.RouteTable, len(m.Routes)),
		secrets: make(map[string]*model.Secret, len(m.Secrets)), dirs: dirs, joined: doc.Joined}
	t := &modelTranslator{reg: reg, m: m, ids: doc.Identities, c: c, st: services, read: read, files: map[string][]byte{},
		grpcServices: map[string]bool{}, listens: map[string]*model.GRPCTarget{}, tables: make(map[string]int, len(m.Routes)), rateLimited: make(map[string]bool, len(m.Routes))}
	for i := range m.Services {
		c.services[m.Services[i].Name] = &m.Services[i]
	}
	for i := range m.Routes {
		c.tables[m.Routes[i].Name] = &m.Routes[i]
		t.tables[m.Routes[i].Name] = i
	}
	for i := range m.Secrets {
		c.secrets[m.Secrets[i].Name] = &m.Secrets[i]
	}
	for i := range m.GRPC {
		for _, to := range m.GRPC[i].To {
			t.grpcServices[to.Service] = true
		}
		for _, r := range m.GRPC[i].Routes {
			for _, to := range r.To {
				t.grpcServices[to.Service] = true
			}
		}
	}
	aggregated(t.grpcServices, c.services)
	if len(c.services) < len(m.Services) || len(c.tables) < len(m.Routes) || len(c.secrets) < len(m.Secrets) ||
		repeats(m.Listeners, func(l *model.Listener) string { return l.Name }) || repeats(m.GRPC, func(g *model.GRPCTarget) string { return g.Target }) {
		c.duplicates(m)
	}
	t.global, c.problems = c.problems, nil
	t.holds = map[reflect.Type]bool{}
	for k, n := range [objKinds]int{len(m.Services), len(m.Routes), len(m.Listeners), len(m.Secrets), len(m.GRPC)} {
		t.out[k] = make([]objOut, n)
	}
	// The services' Clusters and assignments, the bulk of a config, in
	// one array rather than one a service.
	slab := make([]xdstype.Resource, 2*len(m.Services))
	for i := range t.out[objService] {
		t.out[objService][i].inputs = slab[2*i : 2*i : 2*i+2]
	}
	return t
}

// repeats reports whether two of objs have one name: then
// checker.duplicates says which (the maps by name above tell it of the
// services, route tables and secrets).
func repeats[T any](objs []T, name func(*T) string) bool {
	seen := make(map[string]bool, len(objs))
	for i := range objs {
		n := name(&objs[i])
		if seen[n] {
			return true
		}
		seen[n] = true
	}
	return false
}

// all translates every object.
func (t *modelTranslator) all() {
	for k := range objKinds {
		for i := range t.out[k] {
			t.translate(k, i)
		}
	}
}

// emit is what was translated, in the model's order, appended to into,
// and the problems found, the model's own first; with keep, only the
// resources it holds.
func (t *modelTranslator) emit(into []xdstype.Resource, keep map[reachKey]bool) ([]xdstype.Resource, diag.List) {
	problems := t.global
	n := 0
	for k := range objKinds {
		for i := range t.out[k] {
			problems = append(problems, t.out[k][i].durations...)
			n += len(t.out[k][i].inputs)
		}
	}
	inputs := slices.Grow(into, n)
	for k := range objKinds {
		for i := range t.out[k] {
			o := &t.out[k][i]
			problems = append(problems, o.problems...)
			for _, in := range o.inputs {
				if keep == nil || keep[reachKey{in.Type.URL, in.Name}] {
					inputs = append(inputs, in)
				}
			}
		}
	}
	return inputs, problems
}

// translate checks and translates the i-th object of kind k, once.
func (t *modelTranslator) translate(k objKind, i int) *objOut {
	o := &t.out[k][i]
	if o.done {
		return o
	}
	o.done = true
	if t.reuse(o, k, i) {
		return o
	}
	// The object's problems and the facts its checks read are its own: a
	// listener's translation may translate a route table it names.
	saved, savedDeps := t.c.problems, t.c.deps
	t.c.problems, t.c.deps = nil, nil
	var deps []dep
	if keepsChecks(k) {
		t.c.deps = &deps
	}
	emit := func(src model.Source, msg proto.Message) { o.add(t.reg, src, msg) }
	c, m := t.c, t.m
	t.durations(o, k, i)
	switch k {
	case objService:
		s := &m.Services[i]
		c.service(s, t.grpcServices[s.Name])
		c.serviceType(s, t.grpcServices[s.Name])
		c.weightedRoundRobin(s)
		cluster, assignment := t.st.translate(s)
		emit(s.Source, cluster)
		if translate.HasAssignment(s) {
			emit(s.Source, assignment)
		}
	case objTable:
		rt := &m.Routes[i]
		c.table(rt)
		config, limited := t.st.routes(rt)
		t.rateLimited[rt.Name] = limited
		emit(rt.Source, config)
	case objListener:
		l := &m.Listeners[i]
		c.listener(l)
		emit(l.Source, t.st.listener(l, t.isRateLimited))
	case objSecret:
		if s := &m.Secrets[i]; c.secret(s, t.read, t.files) {
			emit(s.Source, translate.Secret(s, t.files))
		}
	case objGRPC:
		g := &m.GRPC[i]
		c.grpcTarget(g)
		c.grpcServer(g, t.listens)
		emit(g.Source, translate.GRPCListener(g))
		emit(g.Source, translate.GRPCRoutes(g))
		if l := translate.GRPCServerListener(g); l != nil {
			emit(g.Source, l)
		}
	}
	o.problems, t.c.problems, t.c.deps = t.c.problems, saved, savedDeps
	t.keep(o, k, i, deps)
	return o
}

// durations checks the durations of the i-th object of kind k into o.
func (t *modelTranslator) durations(o *objOut, k objKind, i int) {
	m := t.m
	switch k {
	case objService:
		t.c.durations(m.Services[i].Source, "service", m.Services[i].Name, &m.Services[i], t.holds)
	case objTable:
		t.c.durations(m.Routes[i].Source, "route table", m.Routes[i].Name, &m.Routes[i], t.holds)
	case objGRPC:
		t.c.durations(m.GRPC[i].Source, "grpc target", m.GRPC[i].Target, &m.GRPC[i], t.holds)
	}
	o.durations, t.c.problems = t.c.problems, nil
}

// add adds msg, of the object at src, to o's inputs.
func (o *objOut) add(reg *xdstype.Registry, src model.Source, msg proto.Message) {
	url := "type.googleapis.com/" + string(msg.ProtoReflect().Descriptor().FullName())
	o.inputs = append(o.inputs, xdstype.Resource{Type: reg.Lookup(url), Name: xdstype.NameOf(msg), Message: msg, File: src.File, Line: src.Line})
}

// isRateLimited reports whether the route table named rate limits,
// translating it first if it was not.
func (t *modelTranslator) isRateLimited(table string) bool {
	if i, ok := t.tables[table]; ok && !t.out[objTable][i].done {
		t.translate(objTable, i)
	}
	return t.rateLimited[table]
}

func (c *checker) service(s *model.Service, grpc bool) {
	const kind = "service"
	oneOf(c, s.Source, kind, s.Name, "protocol", s.Protocol, translate.Protocols)
	oneOf(c, s.Source, kind, s.Name, "lb", s.LB, translate.LBPolicies)
	c.checkTrafficDistribution(s)
	type hostPort struct {
		address string
		port    uint32
	}
	seen := make(map[hostPort]int, len(s.Endpoints))
	// Fields are named only for a problem: this runs for every endpoint
	// on every publish.
	for i, e := range s.Endpoints {
		if e.Health != "" && !slices.Contains(translate.HealthStatuses(), e.Health) {
			c.endpointProblem(s, i, ".health", "%q is not one of %v", e.Health, translate.HealthStatuses())
		}
		if e.Address == "" {
			c.endpointProblem(s, i, ".address", "missing")
		}
		if e.Port == 0 || e.Port > 65535 {
			c.endpointProblem(s, i, ".port", "must be 1 to 65535")
		}
		key := hostPort{e.Address, e.Port}
		if j, dup := seen[key]; dup {
			// gRPC rejects the whole assignment for it; Envoy would
			// double the endpoint's share.
			c.endpointProblem(s, i, "", "%s:%d is already %s", e.Address, e.Port, c.endpointName(s, i, j))
		}
		seen[key] = i
	}
	if t := s.TLS; t != nil && t.Provider != "" {
		if t.CA != "" || t.ClientCert != "" {
			c.add(s.Source, kind, s.Name, "tls.provider", "a certificate provider (proxyless gRPC) or secrets (ca, client_cert: Envoy), not both")
		}
		if !grpc {
			c.add(s.Source, kind, s.Name, "tls.provider", "certificate providers are read by proxyless gRPC clients only, and no grpc target sends RPCs to this service; Envoy takes ca and client_cert")
		}
	} else if t != nil {
		if t.CA != "" && ref(c, s.Source, kind, s.Name, "tls.ca", "secret", t.CA, c.secrets) && c.secrets[t.CA].CAFile == "" {
			c.add(s.Source, kind, s.Name, "tls.ca", "secret %q holds a certificate, not a CA", t.CA)
		}
		if t.ClientCert != "" && ref(c, s.Source, kind, s.Name, "tls.client_cert", "secret", t.ClientCert, c.secrets) && c.secrets[t.ClientCert].CertFile == "" {
			c.add(s.Source, kind, s.Name, "tls.client_cert", "secret %q holds a CA, not a certificate", t.ClientCert)
		}
	}
	if !grpc && slices.Contains(translate.GRPCOnlyLBPolicies(), s.LB) {
		c.add(s.Source, kind, s.Name, "lb", "%q is a proxyless gRPC client's policy (gRFC A52, A62), and no grpc target sends RPCs to this service; Envoy balances by round_robin, least_request, random, ring_hash or maglev", s.LB)
	}
	if grpc {
		// What grpc-go's xDS client rejects, said before it NACKs.
		if !slices.Contains([]string{"", "round_robin", "ring_hash", "least_request", "pick_first", "wrr_locality", "weighted_round_robin"}, s.LB) {
			c.add(s.Source, kind, s.Name, "lb", "%q is not supported by proxyless gRPC clients (round_robin, ring_hash, least_request, pick_first, wrr_locality, weighted_round_robin)", s.LB)
		}
		if s.TLS != nil && s.TLS.Provider == "" {
			c.add(s.Source, kind, s.Name, "tls", "proxyless gRPC clients reject TLS delivered over SDS; name their certificate provider instance (provider: default)")
		}
		if s.Protocol == "tcp" {
			c.add(s.Source, kind, s.Name, "protocol", "a service for proxyless gRPC carries gRPC, not raw TCP")
		}
		if od := s.Outlier; od != nil && od.Consecutive5xx > 0 && od.FailurePercentage == nil {
			// gRFC A50 implements success rate and failure percentage only.
			c.add(s.Source, kind, s.Name, "outlier_detection.consecutive_5xx", "proxyless gRPC clients ignore it; say failure_percentage")
		}
	}
	if od := s.Outlier; od != nil && od.FailurePercentage != nil && od.FailurePercentage.Threshold > 100 {
		c.add(s.Source, kind, s.Name, "outlier_detection.failure_percentage.threshold", "%d: a percentage, at most 100", od.FailurePercentage.Threshold)
	}
}

func (c *checker) table(rt *model.RouteTable) {
	const kind = "route table"
	for i, vh := range rt.VirtualHosts {
		vf := fmt.Sprintf("virtual_hosts[%d]", i)
		if len(vh.Domains) == 0 {
			c.add(rt.Source, kind, rt.Name, vf+".domains", "missing; \"*\" takes every host")
		}
		for j, r := range vh.Routes {
			rf := fmt.Sprintf("%s.routes[%d]", vf, j)
			actions := 0
			for _, set := range []bool{len(r.To) > 0, r.Redirect != nil, r.Direct != nil} {
				if set {
					actions++
				}
			}
			if actions != 1 {
				c.add(rt.Source, kind, rt.Name, rf, "needs exactly one of to, redirect and direct")
			}
			specs := 0
			for _, set := range []bool{r.Match.Prefix != nil, r.Match.Path != "", r.Match.Regex != ""} {
				if set {
					specs++
				}
			}
			if specs > 1 {
				c.add(rt.Source, kind, rt.Name, rf+".match", "at most one of prefix, path and regex")
			}
			if r.Direct != nil && (r.Direct.Status < 200 || r.Direct.Status > 599) {
				c.add(rt.Source, kind, rt.Name, rf+".direct.status", "must be 200 to 599")
			}
			if r.Redirect != nil && r.Redirect.Code != 0 && !slices.Contains([]uint32{301, 302, 303, 307, 308}, r.Redirect.Code) {
				c.add(rt.Source, kind, rt.Name, rf+".redirect.code", "must be 301, 302, 303, 307 or 308")
			}
			if r.Limit != nil && r.Limit.Requests == 0 {
				c.add(rt.Source, kind, rt.Name, rf+".rate_limit.requests", "must be at least 1")
			}
			c.regexes(rt, rf, &vh.Routes[j])
			c.targets(rt.Source, kind, rt.Name, rf+".to", r.To)
		}
	}
}

// targets checks a list of services with weights.
func (c *checker) targets(src model.Source, kind, name, field string, to []model.Target) {
	total := uint64(0)
	for k, t := range to {
		ref(c, src, kind, name, fmt.Sprintf("%s[%d].service", field, k), "service", t.Service, c.services)
		total += uint64(t.Weight)
	}
	if len(to) > 1 && total == 0 {
		c.add(src, kind, name, field, "a split needs weights, and not all zero")
	}
	if msg := checkWeights(to); msg != "" {
		c.add(src, kind, name, field, "%s", msg)
	}
}

func (c *checker) listener(l *model.Listener) {
	const kind = "listener"
	if l.Port == 0 || l.Port > 65535 {
		c.add(l.Source, kind, l.Name, "port", "must be 1 to 65535")
	}
	oneOf(c, l.Source, kind, l.Name, "protocol", l.Protocol, func() []string { return []string{"http", "tcp"} })
	if l.Protocol == "tcp" {
		if l.Service == "" {
			c.add(l.Source, kind, l.Name, "service", "missing: a TCP listener proxies to a service")
		} else {
			ref(c, l.Source, kind, l.Name, "service", "service", l.Service, c.services)
		}
	} else {
		if l.Routes != "" {
			ref(c, l.Source, kind, l.Name, "routes", "route table", l.Routes, c.tables)
		} else if len(l.SNI) == 0 || l.TLS != nil {
			c.add(l.Source, kind, l.Name, "routes", "missing: an HTTP listener uses a route table")
		}
	}
	cert := func(field, name string) {
		if ref(c, l.Source, kind, l.Name, field, "secret", name, c.secrets) && c.secrets[name].CertFile == "" {
			c.add(l.Source, kind, l.Name, field, "secret %q holds a CA, not a certificate", name)
		}
	}
	if l.TLS != nil {
		cert("tls.secret", l.TLS.Secret)
	}
	for i, s := range l.SNI {
		f := fmt.Sprintf("sni[%d]", i)
		if len(s.Names) == 0 {
			c.add(l.Source, kind, l.Name, f+".names", "missing")
		}
		cert(f+".secret", s.Secret)
		if s.Routes != "" {
			ref(c, l.Source, kind, l.Name, f+".routes", "route table", s.Routes, c.tables)
		} else if l.Routes == "" && l.Protocol != "tcp" {
			c.add(l.Source, kind, l.Name, f+".routes", "missing, and the listener has no routes either")
		}
	}
}

// secret checks a secret and reads its files into files.
func (c *checker) secret(s *model.Secret, read ReadFile, files map[string][]byte) bool {
	const kind = "secret"
	cert, ca := s.CertFile != "" || s.KeyFile != "", s.CAFile != ""
	switch {
	case cert == ca:
		c.add(s.Source, kind, s.Name, "", "needs cert_file and key_file, or ca_file")
		return false
	case cert && (s.CertFile == "" || s.KeyFile == ""):
		c.add(s.Source, kind, s.Name, "", "needs both cert_file and key_file")
		return false
	}
	ok := true
	for field, p := range map[string]string{"cert_file": s.CertFile, "key_file": s.KeyFile, "ca_file": s.CAFile} {
		if p == "" {
			continue
		}
		full := p
		if dir := c.dirs[s.Source.File]; dir != "" && !filepath.IsAbs(p) {
			// Not filepath.Join: it would clean away a ".." the reader
			// must see to refuse.
			full = dir + string(filepath.Separator) + p
		}
		data, err := read(full)
		var refused *secretfile.Error
		switch {
		case errors.As(err, &refused):
			// A confinement refusal names the path, the reason and the
			// way out; never the file's contents.
			c.add(s.Source, kind, s.Name, field, "%s", refused.Error())
			ok = false
		case err != nil:
			// The error names the path only: never the file's contents.
			c.add(s.Source, kind, s.Name, field, "cannot read %s: %v", full, unwrapPathError(err))
			ok = false
		case len(data) == 0:
			c.add(s.Source, kind, s.Name, field, "%s is empty (half-written?)", full)
			ok = false
		}
		files[p] = data
	}
	return ok
}

func unwrapPathError(err error) error {
	type unwrapper interface{ Unwrap() error }
	if u, ok := err.(unwrapper); ok && u.Unwrap() != nil {
		return u.Unwrap()
	}
	return err
}

// suggest returns the known name closest to name, if close enough to be a
// likely typo.
func suggest(name string, known []string) string {
	sort.Strings(known)
	best, bestD := "", len(name)/3+2
	for _, k := range known {
		if d := distance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// MaxSecretFileBytes bounds a certificate, key or CA file.
const MaxSecretFileBytes = secretfile.MaxBytes

// LimitedReader reads a file of at most MaxSecretFileBytes, wherever it
// is. It does not confine paths: serve uses a secretfile.Reader.
func LimitedReader(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSecretFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSecretFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxSecretFileBytes)
	}
	return data, nil
}
