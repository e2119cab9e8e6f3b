package cli

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// resourceTable is how `pylon get` shows one kind: its columns (after
// GROUP) and a group's rows.
type resourceTable struct {
	header []string
	rows   func(g groupResources, now time.Time) [][]string
}

var resourceTables = map[string]resourceTable{
	"clusters":  {[]string{"NAME", "TYPE", "ENDPOINTS", "HEALTHY"}, clusterRows},
	"endpoints": {[]string{"CLUSTER", "ENDPOINT", "HEALTH", "WEIGHT", "LOCALITY", "PRIORITY"}, endpointRows},
	"listeners": {[]string{"NAME", "ADDRESS", "PORT", "DESTINATION"}, listenerRows},
	"routes":    {[]string{"NAME", "VIRTUAL HOST", "DOMAINS", "ROUTES", "TO"}, routeRows},
	"secrets":   {[]string{"NAME", "TYPE", "NOT AFTER", "STATUS", "SUBJECT"}, secretRows},
}

// decode reads a dumped resource. A resource this binary cannot read
// (a newer server's extension) is shown by name with "?" columns.
func decode(raw json.RawMessage, m proto.Message) bool {
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(raw, m) == nil
}

// unreadable is the row of a resource decode could not read.
func unreadable(raw json.RawMessage, cols int) []string {
	var m struct {
		Name        string `json:"name"`
		ClusterName string `json:"cluster_name"`
	}
	_ = json.Unmarshal(raw, &m)
	row := []string{m.Name + m.ClusterName}
	for len(row) < cols {
		row = append(row, "?")
	}
	return row
}

func clusterRows(g groupResources, _ time.Time) [][]string {
	assignments := map[string]*endpointv3.ClusterLoadAssignment{}
	for _, raw := range g.Resources["ClusterLoadAssignment"] {
		var a endpointv3.ClusterLoadAssignment
		if decode(raw, &a) {
			assignments[a.GetClusterName()] = &a
		}
	}
	var rows [][]string
	for _, raw := range g.Resources["Cluster"] {
		var c clusterv3.Cluster
		if !decode(raw, &c) {
			rows = append(rows, unreadable(raw, 4))
			continue
		}
		typ := c.GetType().String()
		if ct := c.GetClusterType(); ct != nil {
			typ = ct.GetName()
		}
		as := c.GetLoadAssignment()
		if c.GetType() == clusterv3.Cluster_EDS {
			name := c.GetEdsClusterConfig().GetServiceName()
			if name == "" {
				name = c.GetName()
			}
			as = assignments[name]
		}
		total, healthy := countEndpoints(as)
		rows = append(rows, []string{c.GetName(), typ, strconv.Itoa(total), strconv.Itoa(healthy)})
	}
	return rows
}

// healthy reports whether Envoy routes to an endpoint of this status:
// UNKNOWN (no health checking) counts as healthy, as in Envoy.
func healthy(s corev3.HealthStatus) bool {
	return s == corev3.HealthStatus_UNKNOWN || s == corev3.HealthStatus_HEALTHY
}

func countEndpoints(a *endpointv3.ClusterLoadAssignment) (total, ok int) {
	for _, l := range a.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			total++
			if healthy(e.GetHealthStatus()) {
				ok++
			}
		}
	}
	return total, ok
}

func endpointRows(g groupResources, _ time.Time) [][]string {
	var rows [][]string
	for _, raw := range g.Resources["ClusterLoadAssignment"] {
		var a endpointv3.ClusterLoadAssignment
		if !decode(raw, &a) {
			rows = append(rows, unreadable(raw, 6))
			continue
		}
		if len(a.GetEndpoints()) == 0 {
			rows = append(rows, []string{a.GetClusterName(), "(none)", "-", "-", "-", "-"})
		}
		for _, l := range a.GetEndpoints() {
			loc := locality(l.GetLocality())
			for _, e := range l.GetLbEndpoints() {
				weight := uint32(1)
				if w := e.GetLoadBalancingWeight(); w != nil {
					weight = w.GetValue()
				}
				rows = append(rows, []string{a.GetClusterName(), endpointAddress(e), e.GetHealthStatus().String(),
					strconv.FormatUint(uint64(weight), 10), loc, strconv.FormatUint(uint64(l.GetPriority()), 10)})
			}
		}
	}
	return rows
}

func locality(l *corev3.Locality) string {
	var parts []string
	for _, p := range []string{l.GetRegion(), l.GetZone(), l.GetSubZone()} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "/")
}

func endpointAddress(e *endpointv3.LbEndpoint) string {
	if n := e.GetEndpointName(); n != "" {
		return "named " + n
	}
	return socketAddress(e.GetEndpoint().GetAddress())
}

// socketAddress is HOST:PORT, an IPv6 host in brackets.
func socketAddress(a *corev3.Address) string {
	if p := a.GetPipe(); p != nil {
		return "unix:" + p.GetPath()
	}
	sa := a.GetSocketAddress()
	if sa == nil {
		return "-"
	}
	if sa.GetNamedPort() != "" {
		return net.JoinHostPort(sa.GetAddress(), sa.GetNamedPort())
	}
	return net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
}

func listenerRows(g groupResources, _ time.Time) [][]string {
	var rows [][]string
	for _, raw := range g.Resources["Listener"] {
		var l listenerv3.Listener
		if !decode(raw, &l) {
			rows = append(rows, unreadable(raw, 4))
			continue
		}
		if api := l.GetApiListener().GetApiListener(); api != nil {
			rows = append(rows, []string{l.GetName(), "(api listener: gRPC)", "-", filterDestination("", api)})
			continue
		}
		addr, port := "-", "-"
		if sa := l.GetAddress().GetSocketAddress(); sa != nil {
			addr, port = sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10)
		} else if p := l.GetAddress().GetPipe(); p != nil {
			addr = "unix:" + p.GetPath()
		}
		var dest []string
		chains := append([]*listenerv3.FilterChain(nil), l.GetFilterChains()...)
		if d := l.GetDefaultFilterChain(); d != nil {
			chains = append(chains, d)
		}
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				dest = append(dest, filterDestination(f.GetName(), f.GetTypedConfig()))
			}
		}
		rows = append(rows, []string{l.GetName(), addr, port, strings.Join(unique(dest), ", ")})
	}
	return rows
}

// filterDestination is where a network filter sends traffic: an HTTP
// connection manager's routes (from RDS or inline), a TCP proxy's
// cluster; another filter by its name.
func filterDestination(name string, cfg *anypb.Any) string {
	var hcm hcmv3.HttpConnectionManager
	if cfg.MessageIs(&hcm) && cfg.UnmarshalTo(&hcm) == nil {
		if rds := hcm.GetRds(); rds != nil {
			return "RDS " + rds.GetRouteConfigName()
		}
		if rc := hcm.GetRouteConfig(); rc != nil {
			return "inline routes " + rc.GetName()
		}
		if hcm.GetScopedRoutes() != nil {
			return "scoped routes"
		}
	}
	var tcp tcpproxyv3.TcpProxy
	if cfg.MessageIs(&tcp) && cfg.UnmarshalTo(&tcp) == nil {
		if c := tcp.GetCluster(); c != "" {
			return "cluster " + c
		}
		return "weighted clusters"
	}
	if name == "" {
		return "-"
	}
	return name
}

func routeRows(g groupResources, _ time.Time) [][]string {
	var rows [][]string
	for _, raw := range g.Resources["RouteConfiguration"] {
		var rc routev3.RouteConfiguration
		if !decode(raw, &rc) {
			rows = append(rows, unreadable(raw, 5))
			continue
		}
		if len(rc.GetVirtualHosts()) == 0 {
			rows = append(rows, []string{rc.GetName(), "(none)", "-", "0", "-"})
		}
		for _, vh := range rc.GetVirtualHosts() {
			var to []string
			for _, r := range vh.GetRoutes() {
				to = append(to, routeTargets(r)...)
			}
			rows = append(rows, []string{rc.GetName(), vh.GetName(), strings.Join(vh.GetDomains(), ","),
				strconv.Itoa(len(vh.GetRoutes())), strings.Join(unique(to), ", ")})
		}
	}
	return rows
}

// routeTargets are the clusters a route sends to, or what it does instead.
func routeTargets(r *routev3.Route) []string {
	switch {
	case r.GetDirectResponse() != nil:
		return []string{"direct response"}
	case r.GetRedirect() != nil:
		return []string{"redirect"}
	case r.GetRoute() == nil:
		return []string{"-"}
	}
	a := r.GetRoute()
	switch {
	case a.GetCluster() != "":
		return []string{a.GetCluster()}
	case a.GetClusterHeader() != "":
		return []string{"cluster from header " + a.GetClusterHeader()}
	case a.GetWeightedClusters() != nil:
		var out []string
		for _, w := range a.GetWeightedClusters().GetClusters() {
			out = append(out, w.GetName())
		}
		return out
	}
	return []string{"-"}
}

func unique(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// secretRows shows what a Secret is and, for certificates, when it
// expires: read from the certificate itself (public); key material is
// never read or shown.
func secretRows(g groupResources, now time.Time) [][]string {
	var rows [][]string
	for _, raw := range g.Resources["Secret"] {
		var s tlsv3.Secret
		if !decode(raw, &s) {
			rows = append(rows, unreadable(raw, 5))
			continue
		}
		typ, certs := "-", (*corev3.DataSource)(nil)
		switch {
		case s.GetTlsCertificate() != nil:
			typ, certs = "certificate", s.GetTlsCertificate().GetCertificateChain()
		case s.GetValidationContext() != nil:
			typ, certs = "trusted CA", s.GetValidationContext().GetTrustedCa()
		case s.GetGenericSecret() != nil:
			typ = "generic"
		case s.GetSessionTicketKeys() != nil:
			typ = "session ticket keys"
		}
		notAfter, state, subject := "-", "-", "-"
		if certs != nil {
			notAfter, state, subject = certificateColumns(certs, now)
		}
		rows = append(rows, []string{s.GetName(), typ, notAfter, state, subject})
	}
	return rows
}

// certificateColumns reads the certificates of a DataSource: the earliest
// expiry of the chain, whether it is valid now, and the first
// certificate's names.
func certificateColumns(ds *corev3.DataSource, now time.Time) (notAfter, state, subject string) {
	var pemBytes []byte
	switch {
	case ds.GetInlineBytes() != nil:
		pemBytes = ds.GetInlineBytes()
	case ds.GetInlineString() != "":
		pemBytes = []byte(ds.GetInlineString())
	case ds.GetFilename() != "":
		return "-", "in file " + ds.GetFilename(), "-"
	default:
		return "-", "-", "-"
	}
	chain := parseCertificates(pemBytes)
	if len(chain) == 0 {
		return "-", "no certificate found", "-"
	}
	first, last := chain[0].NotBefore, chain[0].NotAfter
	for _, c := range chain[1:] {
		if c.NotAfter.Before(last) {
			last = c.NotAfter
		}
		if c.NotBefore.After(first) {
			first = c.NotBefore
		}
	}
	switch {
	case now.After(last):
		state = "EXPIRED"
	case now.Before(first):
		state = "NOT YET VALID"
	default:
		state = fmt.Sprintf("valid, %dd left", int(last.Sub(now).Hours()/24))
	}
	return last.UTC().Format(time.RFC3339), state, certName(chain[0])
}

// maxCertificates bounds how many PEM blocks one Secret is read for.
const maxCertificates = 64

// parseCertificates reads the CERTIFICATE blocks of PEM text; any other
// block (a key, should one be there) is skipped unread.
func parseCertificates(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for i := 0; i < maxCertificates; i++ {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// certName is a certificate's DNS names, else its URI SANs, else its
// common name, bounded for a table cell.
func certName(c *x509.Certificate) string {
	names := c.DNSNames
	if len(names) == 0 {
		for _, u := range c.URIs {
			names = append(names, u.String())
		}
	}
	if len(names) == 0 && c.Subject.CommonName != "" {
		names = []string{"CN=" + c.Subject.CommonName}
	}
	s := strings.Join(names, ",")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	if s == "" {
		return "-"
	}
	return s
}
