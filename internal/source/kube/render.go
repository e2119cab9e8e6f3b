package kube

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/model"
)

// ServiceName is the model service a Service's port becomes:
// NAMESPACE/NAME:PORT, or NAMESPACE/NAME for a Service's single unnamed
// port (Kubernetes allows an unnamed port only when it is the only one).
func ServiceName(namespace, name, port string) string {
	if port == "" {
		return namespace + "/" + name
	}
	return namespace + "/" + name + ":" + port
}

// key is an object's namespace and name.
type key struct{ namespace, name string }

// naming is how one cluster's objects are named in the model: prefix
// before each service's name (a named cluster's "NAME/" when clusters
// are kept apart) and region as its endpoints' locality region (a named
// cluster's name), both empty for the unnamed cluster.
type naming struct{ prefix, region string }

// service is what a Service contributes: its ports as model services.
type service struct {
	// names are the model services, one per TCP port, in the Service's
	// order, with their protocol.
	names []string
	// protocols are the names' protocols, compared when several clusters
	// define the same service.
	protocols []string
	// traffic is the Service's traffic distribution as served, compared
	// too.
	traffic string
	items   [][]byte
}

// slice is what one EndpointSlice contributes: its endpoints under the
// model services it names, rendered once when the slice changes.
type slice struct {
	// services are the model services the slice's endpoints join.
	services []string
	eps      []config.Endpoint
	items    [][]byte
	// file is the slice's file as last rendered whole (nothing of it left
	// out): a render reuses it while the slice is unchanged, so that one
	// slice's change rebuilds that slice's file alone.
	file *config.File
	// dropped is what of the slice is not served, and why.
	dropped drops
	// obj is the slice as cached and nodes its endpoints' nodes, with
	// Options.NodeLocalities: a Node's relabelling renders it again.
	obj   *discoveryv1.EndpointSlice
	nodes []string
}

// newService renders a Service: one model service per TCP port, with
// the port's appProtocol as the protocol where Pylon knows it. A Service
// of no TCP port contributes nothing.
func newService(s *corev1.Service, n naming) (*service, error) {
	out := &service{traffic: trafficOf(s.Spec.TrafficDistribution)}
	for _, p := range s.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		svc := model.Service{Name: n.prefix + ServiceName(s.Namespace, s.Name, p.Name), Endpoints: []model.Endpoint{}, TrafficDistribution: out.traffic}
		if p.AppProtocol != nil {
			svc.Protocol = protocolOf(*p.AppProtocol)
		}
		item, err := json.Marshal(svc)
		if err != nil {
			return nil, err
		}
		out.names, out.protocols = append(out.names, svc.Name), append(out.protocols, svc.Protocol)
		out.items = append(out.items, item)
	}
	return out, nil
}

// protocolOf maps a port's appProtocol to the model's protocol ("" for
// the model's default, http1).
func protocolOf(app string) string {
	switch app {
	case "grpc":
		return "grpc"
	case "kubernetes.io/h2c", "http2", "h2c":
		return "http2"
	}
	return ""
}

// trafficOf maps a Service's spec.trafficDistribution to the model's
// traffic_distribution: PreferClose and PreferSameZone (its newer name)
// as they are; PreferSameNode as PreferSameZone, since Pylon cannot tell a
// proxy's node but knows its zone (and Kubernetes falls back from the node
// to the zone); anything else (a value of a later Kubernetes) not at all.
func trafficOf(td *string) string {
	if td == nil {
		return ""
	}
	switch *td {
	case corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone:
		return *td
	case corev1.ServiceTrafficDistributionPreferSameNode:
		return corev1.ServiceTrafficDistributionPreferSameZone
	}
	return ""
}

// serviceOf is the Service an EndpointSlice belongs to (its
// kubernetes.io/service-name label), "" for none.
func serviceOf(s *discoveryv1.EndpointSlice) string {
	return s.Labels[discoveryv1.LabelServiceName]
}

// Bounds on what the cluster sends: what is over them is dropped with a
// warning, object by object, and the rest is served.
const (
	// maxSliceEntries bounds one slice's endpoints times its ports: the
	// API accepts 1,000 endpoints and 20,000 ports in one slice, twenty
	// million entries, which would exhaust Pylon's memory as it renders
	// them. A real slice holds at most 100 endpoints by default (1,000
	// configured) for the ports of one Service.
	maxSliceEntries = 10_000
	// maxZoneBytes bounds an endpoint's zone, copied into every EDS
	// locality: a label value (a zone's name) is at most 63 bytes.
	maxZoneBytes = 63
	// maxDropNotes bounds what is said, per slice, of what was dropped.
	maxDropNotes = 3
)

// Labels of a slice made by Kubernetes' EndpointSlice controller.
const (
	labelManagedBy  = "endpointslice.kubernetes.io/managed-by"
	controllerValue = "endpointslice-controller.k8s.io"
)

// check is what a slice's endpoints must pass to be served.
type check struct {
	// deny are addresses never served (cloud metadata services by
	// default); allow, if any, are the only ones served.
	deny, allow []netip.Prefix
	// foreign serves slices not made by the EndpointSlice controller.
	foreign bool
}

// address parses a and says why it is not served ("" when it is).
func (c check) address(a string) (netip.Addr, string) {
	ip, err := netip.ParseAddr(a)
	if err != nil || ip.Zone() != "" {
		return ip, "not an IP address"
	}
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsUnspecified() || ip.IsMulticast() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		return ip, "loopback, link-local, multicast or unspecified"
	}
	for _, p := range c.deny {
		if p.Contains(ip) {
			return ip, "in --kube-deny-cidrs " + p.String()
		}
	}
	if len(c.allow) == 0 {
		return ip, ""
	}
	for _, p := range c.allow {
		if p.Contains(ip) {
			return ip, ""
		}
	}
	return ip, "not in --kube-allow-cidrs"
}

// drops counts what a slice or render left out and keeps the first
// notes of it, so that a warning says what without growing with it.
type drops struct {
	n     int
	notes []string
}

func (d *drops) add(format string, args ...any) {
	d.n++
	if len(d.notes) < maxDropNotes {
		d.notes = append(d.notes, fmt.Sprintf(format, args...))
	}
}

// String is the notes, and how many more were not noted.
func (d drops) String() string {
	s := strings.Join(d.notes, "; ")
	if d.n > len(d.notes) {
		s += fmt.Sprintf("; and %d more", d.n-len(d.notes))
	}
	return s
}

// slicePort is one of a slice's ports that is served.
type slicePort struct {
	service string
	port    uint32
}

// newSlice renders an EndpointSlice: every endpoint that should receive
// traffic, once per TCP port of the slice. The port is the slice's own,
// which for a named target port the endpoints' controller has already
// resolved. Endpoints of FQDN slices (deprecated) are left out: a gRPC
// client cannot dial a host name from EDS. What the API accepts but Pylon
// must not serve is dropped and noted in the slice's dropped: a port out
// of 1..65535, an address c refuses, a zone over 63 bytes; a slice over
// maxSliceEntries, or (unless c.foreign) not made by the EndpointSlice
// controller, is dropped whole, before any entry is made.
func newSlice(s *discoveryv1.EndpointSlice, n naming, c check) (*slice, error) {
	return newSliceAt(s, n, c, nil)
}

// newSliceAt is newSlice with the Nodes' localities: an endpoint on a
// Node of nodes takes its region (unless the cluster's name is the
// region) and, where the slice gives it no zone, its zone.
func newSliceAt(s *discoveryv1.EndpointSlice, n naming, c check, nodes map[string]locality) (*slice, error) {
	out := &slice{}
	svcName := serviceOf(s)
	if svcName == "" || (s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6) {
		return out, nil
	}
	if by := s.Labels[labelManagedBy]; !c.foreign && by != controllerValue {
		out.dropped.add("not made by the EndpointSlice controller (%s is %q, not %q): dropped whole; --kube-foreign-slices serves it", labelManagedBy, clip(by), controllerValue)
		return out, nil
	}
	ports := out.ports(s, n, svcName)
	var eps []discoveryv1.Endpoint
	for _, e := range s.Endpoints {
		if _, ok := health(e.Conditions); ok && len(e.Addresses) > 0 {
			eps = append(eps, e)
		}
	}
	if len(eps)*len(ports) > maxSliceEntries {
		out.services = nil
		out.dropped = drops{}
		out.dropped.add("%d endpoints times %d ports is over the %d entries a slice may make: dropped whole", len(eps), len(ports), maxSliceEntries)
		return out, nil
	}
	for _, p := range ports {
		for _, e := range eps {
			ip, why := c.address(e.Addresses[0])
			if why != "" {
				out.dropped.add("address %q %s", clip(e.Addresses[0]), why)
				continue
			}
			h, _ := health(e.Conditions)
			ep := config.Endpoint{Service: p.service, Endpoint: model.Endpoint{Address: ip.String(), Port: p.port, Health: h, Region: n.region}}
			if e.NodeName != nil {
				loc := nodes[*e.NodeName]
				ep.Region = cmp.Or(ep.Region, loc.region)
				if e.Zone == nil || *e.Zone == "" {
					ep.Zone = loc.zone
				}
			}
			if e.Zone != nil && *e.Zone != "" {
				if len(*e.Zone) <= maxZoneBytes {
					ep.Zone = *e.Zone
				} else {
					out.dropped.add("zone of %s is %d bytes, over %d: served without a zone", ep.Address, len(*e.Zone), maxZoneBytes)
				}
			}
			item, err := json.Marshal(ep)
			if err != nil {
				return nil, err
			}
			out.eps = append(out.eps, ep)
			out.items = append(out.items, item)
		}
	}
	return out, nil
}

// ports are the slice's TCP ports to serve, each with the model service
// it joins; a port out of 1..65535 (the API accepts 0, negatives and
// 70000) is noted as dropped.
func (out *slice) ports(s *discoveryv1.EndpointSlice, n naming, svcName string) []slicePort {
	var ports []slicePort
	for _, p := range s.Ports {
		if p.Port == nil || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if *p.Port < 1 || *p.Port > 65535 {
			out.dropped.add("port %q is %d, not 1 to 65535", clip(name), *p.Port)
			continue
		}
		service := n.prefix + ServiceName(s.Namespace, svcName, name)
		out.services = append(out.services, service)
		ports = append(ports, slicePort{service, uint32(*p.Port)})
	}
	return ports
}

// clip bounds a value the cluster sends, as shown in a warning.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// health maps an endpoint's conditions to Envoy's health: ready is
// healthy; terminating but still serving is draining (existing
// connections finish, no new ones); anything else receives no traffic and
// is left out. An unset ready means ready, as the API defines it.
func health(c discoveryv1.EndpointConditions) (string, bool) {
	if c.Terminating != nil && *c.Terminating {
		if c.Serving != nil && *c.Serving {
			return "draining", true
		}
		return "", false
	}
	if c.Ready == nil || *c.Ready {
		return "healthy", true
	}
	return "", false
}

// part is one cluster's objects, to render: its files are named under
// prefix.
type part struct {
	cluster, prefix string
	services        map[key]*service
	slices          map[key]*slice
}

// bounds are what a render may make: past them, objects are dropped.
type bounds struct {
	// endpoints and services bound the endpoints and the model services
	// served, every cluster's together.
	endpoints, services int
	// own is what the config's own files hold: they win, and the
	// clusters' services of its names, and endpoints of its endpoints,
	// are dropped.
	own Own
}

// rendered is a render's files and, by cluster, what each cluster's
// objects had dropped from them and what of their settings was overruled
// by a cluster before them.
type rendered struct {
	files              []config.File
	dropped, overruled map[string]*drops
}

// render is the config one cluster's objects make (renderAll of one
// part).
func render(prefix string, services map[key]*service, slices map[key]*slice, b bounds) rendered {
	return renderAll([]part{{cluster: prefix, prefix: prefix, services: services, slices: slices}}, b)
}

// renderAll is the config the clusters' objects make: per cluster, in
// order, a file of the services it is the first to define, then a file of
// endpoints per EndpointSlice. A service several clusters define is
// defined once, by the first (its traffic distribution too: a later
// cluster's other one is counted in overruled), and its endpoints are
// every cluster's (each named cluster's in its own region). The slices' items were rendered
// when each changed, and a slice's file is reused while nothing of it is
// left out. Nothing a cluster sends refuses the whole config: what cannot
// be served is dropped and counted in dropped, by cluster (a service a
// later cluster defines with another protocol, or the config's own files
// define, or name a raw Cluster or assignment after; services past
// b.services; an endpoint the own files hold; a slice past b.endpoints). An
// endpoint of a service its own cluster does not define (a slice
// outliving its Service) is left out silently, and so is one address and
// port met again (the endpoints' controller may hold both while it moves
// an endpoint).
func renderAll(parts []part, b bounds) rendered {
	out := rendered{dropped: map[string]*drops{}, overruled: map[string]*drops{}}
	defs := map[string]def{}
	defined := make([]map[string]bool, len(parts))
	for i, p := range parts {
		d, o := &drops{}, &drops{}
		out.dropped[p.cluster], out.overruled[p.cluster] = d, o
		svcs := map[key]*service{}
		defined[i] = map[string]bool{}
		for _, k := range sortedKeys(p.services) {
			svcs[k] = ownServices(p, k, defs, defined[i], b, d, o)
		}
		out.files = append(out.files, renderServices(p.prefix, svcs))
	}
	size := 0
	for _, p := range parts {
		for _, s := range p.slices {
			size += len(s.eps)
		}
	}
	seen, total := make(map[at]bool, size), 0
	for i, p := range parts {
		d := out.dropped[p.cluster]
		for _, k := range sortedKeys(p.slices) {
			s := p.slices[k]
			if s.dropped.n > 0 {
				d.add("endpointslice %s/%s: %s", k.namespace, k.name, s.dropped)
				d.n += s.dropped.n - 1
			}
			kept := s.keep(defined[i], seen, b.own.Endpoints, k, d)
			n := len(s.eps)
			if kept != nil {
				n = len(kept)
			}
			if n == 0 {
				continue
			}
			if total+n > b.endpoints {
				d.add("endpointslice %s/%s: its %d endpoints would be over the %d served: dropped; narrow the source with --kube-namespaces", k.namespace, k.name, n, b.endpoints)
				s.unsee(kept, seen)
				continue
			}
			total += n
			out.files = append(out.files, s.render(p.prefix, k, kept))
		}
	}
	return out
}

// def is the cluster that defines a service, its protocol and traffic
// distribution.
type def struct{ cluster, protocol, traffic string }

// ownServices are the model services of p's Service k that p is the first
// to define, marked in defs and defined; what is dropped is counted in d,
// and what of a service another cluster defines first is not served in o.
func ownServices(p part, k key, defs map[string]def, defined map[string]bool, b bounds, d, o *drops) *service {
	s, own := p.services[k], &service{}
	for i, n := range s.names {
		first, ok := defs[n]
		switch {
		case b.own.Names[n] != "":
			what := "it"
			if k := b.own.Names[n]; k != "service" {
				what = "a " + k + " of that name"
			}
			d.add("service %s: the config's own files define %s; they win, and the cluster's is dropped", n, what)
		case ok && first.protocol != s.protocols[i]:
			d.add("service %s: protocol %q here but %q in cluster %s, which defines it first: dropped here; give the Services' ports the same appProtocol, or keep the clusters apart (--kube-merge=separate)",
				n, s.protocols[i], first.protocol, first.cluster)
		case ok:
			defined[n] = true
			if first.traffic != s.traffic {
				o.add("service %s: trafficDistribution %q here but %q in cluster %s, which defines it first: %s's is served", n, s.traffic, first.traffic, first.cluster, first.cluster)
			}
		case len(defs) >= b.services:
			d.add("service %s: over the %d services served: dropped; narrow the source with --kube-namespaces", n, b.services)
		default:
			defs[n] = def{p.cluster, s.protocols[i], s.traffic}
			defined[n] = true
			own.names, own.items = append(own.names, n), append(own.items, s.items[i])
		}
	}
	return own
}

// at is an endpoint's service, address and port: served once.
type at = Endpoint

// keep marks the slice's endpoints in seen and returns the indexes of
// those to serve, nil for all of them: an endpoint is left out when its
// service is not defined or it was seen before, and dropped (noted in d
// as the slice k's) when the own files hold it.
func (s *slice) keep(defined map[string]bool, seen, own map[at]bool, k key, d *drops) []int {
	var kept []int
	for i, e := range s.eps {
		a := at{e.Service, e.Address, e.Port}
		ok := defined[e.Service] && !seen[a]
		if ok && len(own) > 0 && own[a] {
			ok = false
			d.add("endpointslice %s/%s: endpoint %s:%d of service %s: the config's own files list it; theirs is served", k.namespace, k.name, e.Address, e.Port, e.Service)
		}
		if ok {
			seen[a] = true
			if kept != nil {
				kept = append(kept, i)
			}
			continue
		}
		if kept == nil {
			kept = make([]int, i, len(s.eps))
			for j := range i {
				kept[j] = j
			}
		}
	}
	return kept
}

// unsee unmarks in seen the endpoints kept (nil: all) of a slice that
// is dropped, so that another slice may serve them.
func (s *slice) unsee(kept []int, seen map[at]bool) {
	if kept == nil {
		for _, e := range s.eps {
			delete(seen, at{e.Service, e.Address, e.Port})
		}
		return
	}
	for _, j := range kept {
		e := s.eps[j]
		delete(seen, at{e.Service, e.Address, e.Port})
	}
}

// render is the slice's file, named under prefix, of the endpoints kept
// (nil: all of them): the file last rendered whole is reused while
// nothing is left out (a slice keeps its key, so its path too).
func (s *slice) render(prefix string, k key, kept []int) config.File {
	path := func() string { return fmt.Sprintf("%s/endpointslices/%s/%s", prefix, k.namespace, k.name) }
	if kept != nil {
		eps, items := make([]config.Endpoint, len(kept)), make([][]byte, len(kept))
		for i, j := range kept {
			eps[i], items[i] = s.eps[j], s.items[j]
		}
		return endpointsFile(path(), eps, items)
	}
	if s.file == nil {
		f := endpointsFile(path(), s.eps, s.items)
		s.file = &f
	}
	return *s.file
}

// sortedKeys are the objects' keys in namespace and name order.
func sortedKeys[V any](objs map[key]V) []key {
	keys := make([]key, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].namespace != keys[j].namespace {
			return keys[i].namespace < keys[j].namespace
		}
		return keys[i].name < keys[j].name
	})
	return keys
}

// renderServices is the file of every Service's model services, one per
// line, in name order. Like the slices' files, it is bounded by the
// source's own bounds (services and endpoints served), not by the total
// the config's own files may hold (config.File.SourceBounded).
func renderServices(prefix string, services map[key]*service) config.File {
	type named struct {
		name string
		item []byte
	}
	var all []named
	for _, s := range services {
		for i, n := range s.names {
			all = append(all, named{n, s.items[i]})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	var data bytes.Buffer
	data.WriteString(`{"services": [`)
	for i, n := range all {
		if i > 0 {
			data.WriteString(",")
		}
		data.WriteString("\n")
		data.Write(n.item)
	}
	data.WriteString("\n]}\n")
	return config.File{Path: prefix + "/services.json", Data: data.Bytes(), SourceBounded: true}
}

// endpointsFile is a file of the top-level endpoints list, item i on line
// i+1, handed over decoded as the store hands its registered endpoints
// (config.File.Endpoints), so that a publish does not parse again what
// did not change.
func endpointsFile(path string, eps []config.Endpoint, items [][]byte) config.File {
	var data bytes.Buffer
	data.WriteString(`{"endpoints": [`)
	decoded := make([]config.Endpoint, len(eps))
	for i, e := range eps {
		if i > 0 {
			data.WriteString(",\n")
		}
		data.Write(items[i])
		decoded[i] = e
		decoded[i].File, decoded[i].Line = path, i+1
	}
	data.WriteString("]}")
	return config.File{Path: path, Data: data.Bytes(), Endpoints: decoded, SourceBounded: true}
}
