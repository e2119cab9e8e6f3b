package kube

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func ptr[T any](v T) *T { return &v }

func svcObj(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Ports: ports}}
}

func sliceObj(ns, name, svc string, typ discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc, labelManagedBy: controllerValue,
		}},
		AddressType: typ, Ports: ports, Endpoints: eps,
	}
}

func ep(addr string, ready, serving, terminating *bool, zone string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}}
	if zone != "" {
		e.Zone = ptr(zone)
	}
	return e
}

// load renders the objects and loads the files as the pipeline would,
// returning each service's endpoints.
func load(t *testing.T, svcs []*corev1.Service, slices []*discoveryv1.EndpointSlice) map[string][]model.Endpoint {
	t.Helper()
	ss, sl := map[key]*service{}, map[key]*slice{}
	for _, s := range svcs {
		r, err := newService(s, naming{})
		if err != nil {
			t.Fatal(err)
		}
		ss[key{s.Namespace, s.Name}] = r
	}
	for _, s := range slices {
		r, err := newSlice(s, naming{}, defaultCheck(t))
		if err != nil {
			t.Fatal(err)
		}
		sl[key{s.Namespace, s.Name}] = r
	}
	files := render("kubernetes/test", ss, sl, defaultBounds).files
	doc, err := config.Load(xdstype.New(), files)
	if err != nil {
		t.Fatalf("the rendered files do not load: %v", err)
	}
	if problems := doc.JoinEndpoints(); len(problems) > 0 {
		t.Fatalf("the rendered endpoints do not join: %v", problems)
	}
	out := map[string][]model.Endpoint{}
	for _, s := range doc.Services {
		out[s.Name] = s.Endpoints
		if out[s.Name] == nil {
			out[s.Name] = []model.Endpoint{}
		}
	}
	return out
}

var (
	yes, no = ptr(true), ptr(false)
	tcp     = ptr(corev1.ProtocolTCP)
)

func TestEndpointConditionsMapToEnvoyHealth(t *testing.T) {
	got := load(t,
		[]*corev1.Service{svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80})},
		[]*discoveryv1.EndpointSlice{sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: tcp}},
			ep("10.0.0.1", yes, yes, no, "z1"),  // ready
			ep("10.0.0.2", nil, nil, nil, "z2"), // unset: ready
			ep("10.0.0.3", no, yes, yes, "z1"),  // terminating, serving: draining
			ep("10.0.0.4", no, no, yes, "z1"),   // terminating, not serving: absent
			ep("10.0.0.5", no, no, no, "z1"),    // not ready: absent
		)})
	want := map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.1", Port: 8080, Zone: "z1", Health: "healthy"},
		{Address: "10.0.0.2", Port: 8080, Zone: "z2", Health: "healthy"},
		{Address: "10.0.0.3", Port: 8080, Zone: "z1", Health: "draining"},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("services (-want +got):\n%s", d)
	}
}

func TestNamedTargetPortsAreTheSlicesPortsAndDualStackJoins(t *testing.T) {
	got := load(t,
		[]*corev1.Service{svcObj("shop", "api",
			corev1.ServicePort{Name: "grpc", Port: 9000, AppProtocol: ptr("grpc")},
			corev1.ServicePort{Name: "metrics", Port: 9100},
			corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		)},
		[]*discoveryv1.EndpointSlice{
			sliceObj("shop", "api-v4", "api", discoveryv1.AddressTypeIPv4,
				[]discoveryv1.EndpointPort{{Name: ptr("grpc"), Port: ptr(int32(50051))}, {Name: ptr("metrics"), Port: ptr(int32(9102))}},
				ep("10.0.0.1", yes, yes, no, "")),
			sliceObj("shop", "api-v6", "api", discoveryv1.AddressTypeIPv6,
				[]discoveryv1.EndpointPort{{Name: ptr("grpc"), Port: ptr(int32(50051))}},
				ep("fd00::1", yes, yes, no, "")),
		})
	want := map[string][]model.Endpoint{
		"shop/api:grpc":    {{Address: "10.0.0.1", Port: 50051, Health: "healthy"}, {Address: "fd00::1", Port: 50051, Health: "healthy"}},
		"shop/api:metrics": {{Address: "10.0.0.1", Port: 9102, Health: "healthy"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("services (-want +got):\n%s", d)
	}
}

func TestHeadlessServiceIsAPlainEndpointSetAndAnUnnamedPortHasNoSuffix(t *testing.T) {
	headless := svcObj("db", "pg", corev1.ServicePort{Port: 5432})
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	got := load(t, []*corev1.Service{headless},
		[]*discoveryv1.EndpointSlice{sliceObj("db", "pg-1", "pg", discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{{Port: ptr(int32(5432))}}, ep("10.0.1.1", yes, yes, no, ""))})
	want := map[string][]model.Endpoint{"db/pg": {{Address: "10.0.1.1", Port: 5432, Health: "healthy"}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("services (-want +got):\n%s", d)
	}
}

func TestSliceWithoutItsServiceAndRepeatedEndpointsAreLeftOut(t *testing.T) {
	port := []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}}
	got := load(t,
		[]*corev1.Service{svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80})},
		[]*discoveryv1.EndpointSlice{
			sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, port, ep("10.0.0.1", yes, yes, no, "")),
			// The controller moving an endpoint between slices holds it in both.
			sliceObj("shop", "web-b", "web", discoveryv1.AddressTypeIPv4, port, ep("10.0.0.1", yes, yes, no, ""), ep("10.0.0.2", yes, yes, no, "")),
			// The Service is gone; its slice lingers until collected.
			sliceObj("shop", "old-a", "old", discoveryv1.AddressTypeIPv4, port, ep("10.0.0.9", yes, yes, no, "")),
		})
	want := map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.1", Port: 8080, Health: "healthy"}, {Address: "10.0.0.2", Port: 8080, Health: "healthy"},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("services (-want +got):\n%s", d)
	}
}

func TestASlicePastMaxEndpointsIsDroppedAndTheRestServed(t *testing.T) {
	ss, sl := manySlices(3, 2)
	r := render("kubernetes/test", ss, sl, bounds{endpoints: 5, services: DefaultMaxServices})
	var paths []string
	for _, f := range r.files {
		paths = append(paths, f.Path)
	}
	want := []string{"kubernetes/test/services.json", "kubernetes/test/endpointslices/shop/web0-a", "kubernetes/test/endpointslices/shop/web1-a"}
	if d := cmp.Diff(want, paths); d != "" {
		t.Fatalf("files (-want +got):\n%s", d)
	}
	if d := r.dropped["kubernetes/test"]; d.n != 1 || !strings.Contains(d.String(), "shop/web2-a: its 2 endpoints would be over the 5 served") {
		t.Fatalf("dropped %d: %q, want web2-a's slice named", d.n, d.String())
	}
}

func TestTransformKeepsOnlyWhatTheSourceReads(t *testing.T) {
	in := sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, nil, ep("10.0.0.1", yes, yes, no, "z"))
	in.Annotations = map[string]string{"big": strings.Repeat("x", 1000)}
	in.Labels["team"] = strings.Repeat("y", 63)
	in.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	in.Endpoints[0].NodeName = ptr("node-1")
	in.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: "web-1"}
	out, err := transform(in)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*discoveryv1.EndpointSlice)
	if got.Annotations != nil || got.ManagedFields != nil || got.Endpoints[0].NodeName != nil || got.Endpoints[0].TargetRef != nil || got.Labels["team"] != "" {
		t.Fatalf("transform kept fields Pylon does not read: %+v", got)
	}
	if got.Endpoints[0].Addresses[0] != "10.0.0.1" || *got.Endpoints[0].Zone != "z" || got.Labels[discoveryv1.LabelServiceName] != "web" || got.Labels[labelManagedBy] != controllerValue {
		t.Fatalf("transform dropped what Pylon reads: %+v", got)
	}
}

func TestAServiceTheConfigsFilesDefineIsDroppedFromTheClusterAndTheFilesWin(t *testing.T) {
	r, err := newService(svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80}, corev1.ServicePort{Name: "admin", Port: 81}), naming{})
	if err != nil {
		t.Fatal(err)
	}
	sl, err := newSlice(sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}, {Name: ptr("admin"), Port: ptr(int32(8081))}},
		ep("10.0.0.1", yes, yes, no, "")), naming{}, defaultCheck(t))
	if err != nil {
		t.Fatal(err)
	}
	b := defaultBounds
	b.own = Own{Names: map[string]string{"shop/web:http": "service"}}
	out := render("kubernetes/test", map[key]*service{{"shop", "web"}: r}, map[key]*slice{{"shop", "web-a"}: sl}, b)
	own := config.File{Path: "pylon.yaml", Data: []byte("services:\n- { name: \"shop/web:http\", endpoints: [{ address: 192.0.2.1, port: 80 }] }\n")}
	all := append([]config.File{own}, out.files...)
	if _, err := compile.Compile(xdstype.New(), all, compile.LimitedReader); err != nil {
		t.Fatalf("the files and the cluster's rest do not compile: %v", err)
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
	want := map[string][]model.Endpoint{
		"shop/web:http":  {{Address: "192.0.2.1", Port: 80}},
		"shop/web:admin": {{Address: "10.0.0.1", Port: 8081, Health: "healthy"}},
	}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("services (-want +got):\n%s", d)
	}
	if d := out.dropped["kubernetes/test"]; d.n != 1 || !strings.Contains(d.String(), "shop/web:http: the config's own files define it; they win") {
		t.Fatalf("dropped %d: %q, want shop/web:http named", d.n, d.String())
	}
}

// manySlices are n Services' slices, each of per endpoints.
func manySlices(n, per int) (map[key]*service, map[key]*slice) {
	ss, sl := map[key]*service{}, map[key]*slice{}
	for i := range n {
		name := "web" + strconv.Itoa(i)
		r, _ := newService(svcObj("shop", name, corev1.ServicePort{Name: "http", Port: 80}), naming{})
		ss[key{"shop", name}] = r
		sl[key{"shop", name + "-a"}] = sliceOf(name, i, per)
	}
	return ss, sl
}

// sliceOf is Service name's slice of per endpoints, numbered gen.
func sliceOf(name string, gen, per int) *slice {
	eps := make([]discoveryv1.Endpoint, per)
	for j := range eps {
		eps[j] = ep(fmt.Sprintf("10.%d.%d.%d", gen/256%256, gen%256, j), yes, yes, no, "z1")
	}
	s, _ := newSlice(sliceObj("shop", name+"-a", name, discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}}, eps...), naming{}, check{})
	return s
}

func TestOneSliceChangeRendersThatSlicesFileAlone(t *testing.T) {
	ss, sl := manySlices(20, 5)
	before := render("kubernetes/test", ss, sl, defaultBounds).files
	sl[key{"shop", "web7-a"}] = sliceOf("web7", 1000, 5)
	after := render("kubernetes/test", ss, sl, defaultBounds).files
	if len(before) != len(after) {
		t.Fatalf("%d files, then %d", len(before), len(after))
	}
	// A file built again has new bytes; a reused one the same.
	var rebuilt []string
	for i := range after {
		if &before[i].Data[0] != &after[i].Data[0] {
			rebuilt = append(rebuilt, after[i].Path)
		}
	}
	want := []string{"kubernetes/test/services.json", "kubernetes/test/endpointslices/shop/web7-a"}
	if d := cmp.Diff(want, rebuilt); d != "" {
		t.Fatalf("files rebuilt after one slice's change (-want +got):\n%s", d)
	}
}

// BenchmarkRenderOneSliceChange renders 10,000 endpoints in 1,000
// slices after one slice changed, as the source does for each change.
func BenchmarkRenderOneSliceChange(b *testing.B) {
	ss, sl := manySlices(1000, 10)
	render("kubernetes/test", ss, sl, defaultBounds)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sl[key{"shop", "web7-a"}] = sliceOf("web7", 1000+i%2, 10)
		render("kubernetes/test", ss, sl, defaultBounds)
	}
}

func TestAServiceALaterClusterDefinesWithAnotherProtocolIsDroppedThereAndTheFirstServed(t *testing.T) {
	grpc, _ := newService(svcObj("shop", "web", corev1.ServicePort{Name: "api", Port: 80, AppProtocol: ptr("grpc")}), naming{})
	plain, _ := newService(svcObj("shop", "web", corev1.ServicePort{Name: "api", Port: 80}), naming{region: "west"})
	r := renderAll([]part{
		{cluster: "east", prefix: "kubernetes/east", services: map[key]*service{{"shop", "web"}: grpc}},
		{cluster: "west", prefix: "kubernetes/west", services: map[key]*service{{"shop", "web"}: plain}},
	}, defaultBounds)
	if d := r.dropped["west"]; d.n != 1 || !strings.Contains(d.String(), `shop/web:api: protocol "" here but "grpc" in cluster east`) {
		t.Fatalf("west dropped %d: %q, want shop/web:api named with both protocols", d.n, d.String())
	}
	doc, err := config.Load(xdstype.New(), r.files)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Services) != 1 || doc.Services[0].Protocol != "grpc" {
		t.Fatalf("services %+v, want east's shop/web:api alone, grpc", doc.Services)
	}
}

// defaultBounds are the source's default bounds.
var defaultBounds = bounds{endpoints: DefaultMaxEndpoints, services: DefaultMaxServices}

// defaultCheck is the source's default check of a slice's endpoints.
func defaultCheck(t testing.TB) check {
	t.Helper()
	c, err := newCheck(Options{DenyCIDRs: DefaultDenyCIDRs()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
