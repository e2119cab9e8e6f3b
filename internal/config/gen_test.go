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
