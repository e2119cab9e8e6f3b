package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/pylon-xds/pylon/internal/config"
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
