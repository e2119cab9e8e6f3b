package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

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
	items     [][]byte
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
}

// newService renders a Service: one model service per TCP port, with
// the port's appProtocol as the protocol where Pylon knows it. A Service
// of no TCP port contributes nothing.
func newService(s *corev1.Service, n naming) (*service, error) {
	out := &service{}
	for _, p := range s.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		svc := model.Service{Name: n.prefix + ServiceName(s.Namespace, s.Name, p.Name), Endpoints: []model.Endpoint{}}
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

// serviceOf is the Service an EndpointSlice belongs to (its
// kubernetes.io/service-name label), "" for none.
func serviceOf(s *discoveryv1.EndpointSlice) string {
	return s.Labels[discoveryv1.LabelServiceName]
}

// newSlice renders an EndpointSlice: every endpoint that should receive
// traffic, once per TCP port of the slice. The port is the slice's own,
// which for a named target port the endpoints' controller has already
// resolved. Endpoints of FQDN slices (deprecated) are left out: a gRPC
// client cannot dial a host name from EDS.
func newSlice(s *discoveryv1.EndpointSlice, n naming) (*slice, error) {
	out := &slice{}
	svcName := serviceOf(s)
	if svcName == "" || (s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6) {
		return out, nil
	}
	for _, p := range s.Ports {
		if p.Port == nil || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		service := n.prefix + ServiceName(s.Namespace, svcName, name)
		out.services = append(out.services, service)
		for _, e := range s.Endpoints {
			h, ok := health(e.Conditions)
			if !ok || len(e.Addresses) == 0 {
				continue
			}
			ep := config.Endpoint{Service: service, Endpoint: model.Endpoint{Address: e.Addresses[0], Port: uint32(*p.Port), Health: h, Region: n.region}}
			if e.Zone != nil {
				ep.Zone = *e.Zone
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

// render is the config one cluster's objects make (renderAll of one
// part).
func render(prefix string, services map[key]*service, slices map[key]*slice, maxEndpoints int) ([]config.File, error) {
	return renderAll([]part{{cluster: prefix, prefix: prefix, services: services, slices: slices}}, maxEndpoints)
}

// renderAll is the config the clusters' objects make: per cluster, in
// order, a file of the services it is the first to define, then a file of
// endpoints per EndpointSlice. A service several clusters define is
// defined once, by the first, and its endpoints are every cluster's (each
// named cluster's in its own region); defined with different protocols it
// is an error naming both clusters. The slices' items were rendered when
// each changed, and a slice's file is reused while nothing of it is left
// out. An endpoint of a service its own cluster does not define (a slice
// outliving its Service) is left out, and so is one address and port met
// again (the endpoints' controller may hold both while it moves an
// endpoint), so that neither refuses the whole config.
func renderAll(parts []part, maxEndpoints int) ([]config.File, error) {
	type def struct{ cluster, protocol string }
	defs := map[string]def{}
	var files []config.File
	for _, p := range parts {
		svcs := map[key]*service{}
		for k, s := range p.services {
			own := &service{}
			for i, n := range s.names {
				d, ok := defs[n]
				if ok && d.protocol != s.protocols[i] {
					return nil, fmt.Errorf("kubernetes: service %s is protocol %q in cluster %s and %q in cluster %s; give the Services' ports the same appProtocol, or keep the clusters apart (--kube-merge=separate)",
						n, d.protocol, d.cluster, s.protocols[i], p.cluster)
				}
				if !ok {
					defs[n] = def{p.cluster, s.protocols[i]}
					own.names, own.items = append(own.names, n), append(own.items, s.items[i])
				}
			}
			svcs[k] = own
		}
		files = append(files, renderServices(p.prefix, svcs))
	}
	size := 0
	for _, p := range parts {
		for _, s := range p.slices {
			size += len(s.eps)
		}
	}
	seen, total := make(map[at]bool, size), 0
	for _, p := range parts {
		defined := map[string]bool{}
		for _, s := range p.services {
			for _, n := range s.names {
				defined[n] = true
			}
		}
		for _, k := range sortedKeys(p.slices) {
			s := p.slices[k]
			kept := s.keep(defined, seen)
			n := len(s.eps)
			if kept != nil {
				n = len(kept)
			}
			if n == 0 {
				continue
			}
			if total += n; total > maxEndpoints {
				return nil, fmt.Errorf("kubernetes: over %d endpoints; narrow the source with --kube-namespaces or --kube-selector", maxEndpoints)
			}
			files = append(files, s.render(p.prefix, k, kept))
		}
	}
	return files, nil
}

// at is an endpoint's service, address and port: served once.
type at struct {
	service, address string
	port             uint32
}

// keep marks the slice's endpoints in seen and returns the indexes of
// those to serve, nil for all of them: an endpoint is left out when its
// service is not defined or it was seen before.
func (s *slice) keep(defined map[string]bool, seen map[at]bool) []int {
	var kept []int
	for i, e := range s.eps {
		a := at{e.Service, e.Address, e.Port}
		if defined[e.Service] && !seen[a] {
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

// sortedKeys are the slices' keys in namespace and name order.
func sortedKeys(slices map[key]*slice) []key {
	keys := make([]key, 0, len(slices))
	for k := range slices {
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
// line, in name order.
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
	return config.File{Path: prefix + "/services.json", Data: data.Bytes()}
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
	return config.File{Path: path, Data: data.Bytes(), Endpoints: decoded}
}
