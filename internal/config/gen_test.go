package config

import (
	"fmt"
	"strings"
)

// bigConfig returns a realistic config of about size bytes: raw clusters
// with endpoints and model services, as YAML or (asJSON) JSON.
func bigConfig(size int, asJSON bool) []byte {
	var b strings.Builder
	if asJSON {
		b.WriteString(`{"version": 1, "resources": [`)
		for i := 0; b.Len() < size-200; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "cluster-%d", "type": "STATIC", "connect_timeout": "1s", "load_assignment": {"cluster_name": "cluster-%d", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "10.0.%d.%d", "port_value": 8080}}}}]}]}}`+"\n", i, i, i/256%256, i%256)
		}
		b.WriteString("]}\n")
		return []byte(b.String())
	}
	b.WriteString("version: 1\nresources:\n")
	for i := 0; b.Len() < size-200; i++ {
		fmt.Fprintf(&b, `- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: cluster-%d
  type: STATIC
  connect_timeout: 1s
  load_assignment:
    cluster_name: cluster-%d
    endpoints:
    - lb_endpoints:
      - endpoint: { address: { socket_address: { address: 10.0.%d.%d, port_value: 8080 } } }
`, i, i, i/256%256, i%256)
	}
	return []byte(b.String())
}

// itemsWorld is a config of n model services of ten endpoints each, a
// listener and a route table per hundred services, as one JSON file: the
// compile package's benchmark world, whose items are all model objects.
func itemsWorld(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"services": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"name": "svc-%d", "endpoints": [`, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"address": "10.%d.%d.%d", "port": 8080}`, i/256, i%256, j)
		}
		b.WriteString("]}")
	}
	tables := max(1, n/100)
	b.WriteString("],\n\"routes\": [")
	for t := range tables {
		if t > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"name": "r%d", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [`, t)
		for i := t; i < n; i += tables {
			if i != t {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"match": {"prefix": "/svc-%d/"}, "to": [{"service": "svc-%d"}]}`, i, i)
		}
		b.WriteString("]}]}")
	}
	b.WriteString("],\n\"listeners\": [")
	for t := range tables {
		if t > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"name": "l%d", "port": %d, "routes": "r%d"}`, t, 10000+t, t)
	}
	b.WriteString("]}\n")
	return []byte(b.String())
}
