package kube

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// webAndSlice are shop/web (port http) and its slice web-a of
// 10.0.0.1 and 10.0.0.2 at 8080.
func webAndSlice(t *testing.T) (map[key]*service, map[key]*slice) {
	t.Helper()
	r, err := newService(webService(), naming{})
	if err != nil {
		t.Fatal(err)
	}
	sl, err := newSlice(sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, httpPort(8080),
		ep("10.0.0.1", yes, yes, no, ""), ep("10.0.0.2", yes, yes, no, "")), naming{}, defaultCheck(t))
	if err != nil {
		t.Fatal(err)
	}
	return map[key]*service{{"shop", "web"}: r}, map[key]*slice{{"shop", "web-a"}: sl}
}

// compileWith compiles the own file with the rendered files, as the
// pipeline does, and returns each service's endpoints.
func compileWith(t *testing.T, own string, files []config.File) map[string][]model.Endpoint {
	t.Helper()
	all := append([]config.File{{Path: "own.yaml", Data: []byte(own)}}, files...)
	if _, err := compile.Compile(xdstype.New(), all, compile.LimitedReader); err != nil {
		t.Fatalf("the own file and the cluster's rest do not compile: %v", err)
	}
	doc, err := config.Load(xdstype.New(), all)
	if err != nil {
		t.Fatal(err)
	}
	if p := doc.JoinEndpoints(); len(p) > 0 {
		t.Fatal(p)
	}
	got := map[string][]model.Endpoint{}
	for _, s := range doc.Services {
		got[s.Name] = s.Endpoints
	}
	return got
}

func TestAClusterEndpointTheOwnFilesListIsDroppedWithAWarningAndTheirsServed(t *testing.T) {
	ss, sl := webAndSlice(t)
	b := defaultBounds
	b.own = Own{Endpoints: map[Endpoint]bool{{Service: "shop/web:http", Address: "10.0.0.2", Port: 8080}: true}}
	out := render("kubernetes/test", ss, sl, b)
	got := compileWith(t, "endpoints:\n- { service: \"shop/web:http\", address: 10.0.0.2, port: 8080 }\n", out.files)
	want := map[string][]model.Endpoint{"shop/web:http": {{Address: "10.0.0.2", Port: 8080}, {Address: "10.0.0.1", Port: 8080, Health: "healthy"}}}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("services (-want +got):\n%s", d)
	}
	if d := out.dropped["kubernetes/test"]; d.n != 1 || !strings.Contains(d.String(), "endpointslice shop/web-a: endpoint 10.0.0.2:8080 of service shop/web:http: the config's own files list it; theirs is served") {
		t.Fatalf("dropped %d: %q, want the slice's 10.0.0.2:8080 named", d.n, d.String())
	}
}

func TestAServiceTheOwnFilesNameARawClusterOrAssignmentAfterIsDroppedFromTheCluster(t *testing.T) {
	for _, kind := range []string{"Cluster", "ClusterLoadAssignment"} {
		t.Run(kind, func(t *testing.T) {
			ss, sl := webAndSlice(t)
			r, err := newService(svcObj("shop", "api", corev1.ServicePort{Name: "http", Port: 80}), naming{})
			if err != nil {
				t.Fatal(err)
			}
			ss[key{"shop", "api"}] = r
			b := defaultBounds
			b.own = Own{Names: map[string]string{"shop/web:http": kind}}
			out := render("kubernetes/test", ss, sl, b)
			raw := map[string]string{
				"Cluster":               "- { \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: \"shop/web:http\", type: STATIC, connect_timeout: 1s }\n",
				"ClusterLoadAssignment": "- { \"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment, cluster_name: \"shop/web:http\" }\n",
			}[kind]
			got := compileWith(t, "resources:\n"+raw, out.files)
			if d := cmp.Diff(map[string][]model.Endpoint{"shop/api:http": {}}, got, cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("services (-want +got):\n%s", d)
			}
			if d := out.dropped["kubernetes/test"]; d.n != 1 || !strings.Contains(d.String(), "service shop/web:http: the config's own files define a "+kind+" of that name") {
				t.Fatalf("dropped %d: %q, want shop/web:http named with the files' %s", d.n, d.String(), kind)
			}
		})
	}
}
