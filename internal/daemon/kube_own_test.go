package daemon

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/source/kube"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestTheOwnFilesReserveTheirServicesRawClustersAndAssignmentsAndEndpointsOfOthers(t *testing.T) {
	own := `services:
- { name: "shop/web:http", endpoints: [{ address: 10.0.0.9, port: 80 }] }
resources:
- { "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: "shop/api:grpc", type: STATIC, connect_timeout: 1s }
- { "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment, cluster_name: "shop/db:tcp" }
endpoints:
- { service: "shop/cart:http", address: 10.0.0.1, port: 8080 }
- { service: "shop/web:http", address: 10.0.0.2, port: 8080 }
`
	doc, err := config.Load(xdstype.New(), []config.File{{Path: "own.yaml", Data: []byte(own)}})
	if err != nil {
		t.Fatal(err)
	}
	want := kube.Own{
		Names: map[string]string{"shop/web:http": "service", "shop/api:grpc": "Cluster", "shop/db:tcp": "ClusterLoadAssignment"},
		// shop/web:http's are the files' service's: no cluster defines it.
		Endpoints: map[kube.Endpoint]bool{{Service: "shop/cart:http", Address: "10.0.0.1", Port: 8080}: true},
	}
	if d := cmp.Diff(want, ownOf(doc)); d != "" {
		t.Fatalf("reserved (-want +got):\n%s", d)
	}
}
