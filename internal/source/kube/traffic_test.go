package kube

import (
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestAServicesTrafficDistributionIsItsServicesAndPreferSameNodeIsServedAsTheZone(t *testing.T) {
	services := map[key]*service{}
	for name, td := range map[string]string{
		"close": corev1.ServiceTrafficDistributionPreferClose, "zone": corev1.ServiceTrafficDistributionPreferSameZone,
		"node": corev1.ServiceTrafficDistributionPreferSameNode, "none": "",
	} {
		svc := svcObj("shop", name, corev1.ServicePort{Name: "http", Port: 80})
		if td != "" {
			svc.Spec.TrafficDistribution = ptr(td)
		}
		// Through the transform, as the informers cache it.
		cached, err := transform(svc)
		if err != nil {
			t.Fatal(err)
		}
		r, err := newService(cached.(*corev1.Service), naming{})
		if err != nil {
			t.Fatal(err)
		}
		services[key{"shop", name}] = r
	}
	doc, err := config.Load(xdstype.New(), render("kubernetes/test", services, nil, defaultBounds).files)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range doc.Services {
		got[s.Name] = s.TrafficDistribution
	}
	want := map[string]string{"shop/close:http": "PreferClose", "shop/zone:http": "PreferSameZone", "shop/node:http": "PreferSameZone", "shop/none:http": ""}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("traffic_distribution by service (-want +got):\n%s", d)
	}
}

// A Service several clusters define is served with the first cluster's
// trafficDistribution (in the order given), as its protocol is; a later
// cluster's other value is not served, and that cluster's status says so,
// naming the service, both clusters and both values. It drops nothing:
// the later cluster's endpoints are served.
func TestATrafficDistributionALaterClusterDisagreesWithIsTheFirstsAndSaidSo(t *testing.T) {
	close := svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80})
	close.Spec.TrafficDistribution = ptr(corev1.ServiceTrafficDistributionPreferClose)
	src := clusterSource(t, "east", "west")
	east, west := src.clusters[0], src.clusters[1]
	src.setService(east, close)
	src.setService(west, svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80}))
	src.setSlice(west, sliceObj("shop", "web-w", "web", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: tcp}}, ep("10.0.0.2", yes, yes, no, "")))
	files, _ := src.files()
	doc, err := config.Load(xdstype.New(), files)
	if err != nil {
		t.Fatal(err)
	}
	if p := doc.JoinEndpoints(); len(p) > 0 {
		t.Fatal(p)
	}
	if len(doc.Services) != 1 || doc.Services[0].TrafficDistribution != "PreferClose" || len(doc.Services[0].Endpoints) != 1 {
		t.Fatalf("services %+v, want shop/web:http once, east's PreferClose, with west's endpoint", doc.Services)
	}
	st := src.Status().Kubernetes
	want := `service shop/web:http: trafficDistribution "" here but "PreferClose" in cluster east, which defines it first: east's is served`
	if st[1].Overruled != 1 || st[1].OverruledNote != want || st[1].Dropped != 0 {
		t.Fatalf("west's status %+v, want overruled 1: %q, nothing dropped", st[1], want)
	}
	if st[0].Overruled != 0 {
		t.Fatalf("east's status %+v, want nothing overruled", st[0])
	}
	// West agreeing, it is said no more.
	src.setService(west, close)
	src.files()
	if st := src.Status().Kubernetes[1]; st.Overruled != 0 || st.OverruledNote != "" {
		t.Fatalf("west's status %+v once it agrees, want nothing overruled", st)
	}
}

// clusterSource is a source of the named clusters, connected to nothing.
func clusterSource(t *testing.T, names ...string) *Source {
	t.Helper()
	src := &Source{opts: Options{MaxEndpoints: 100, MaxServices: 100}, log: slog.New(slog.DiscardHandler), check: defaultCheck(t), changed: make(chan struct{}, 1)}
	for _, n := range names {
		src.clusters = append(src.clusters, &cluster{name: n, naming: naming{region: n}, services: map[key]*service{}, slices: map[key]*slice{}, state: source.ClusterStatus{Name: n}})
	}
	return src
}
