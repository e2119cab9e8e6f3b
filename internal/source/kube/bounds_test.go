package kube

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"github.com/pylon-xds/pylon/internal/model"
)

// webService is shop/web with the port http.
func webService() *corev1.Service {
	return svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80})
}

// httpPort is the slice port http at port.
func httpPort(port int32) []discoveryv1.EndpointPort {
	return []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: tcp}}
}

func TestASliceOfTooManyEndpointsTimesPortsIsDroppedWholeBeforeItsEntriesAreMade(t *testing.T) {
	// The API accepts 1,000 endpoints and 20,000 ports in one slice; 1,000
	// by 20 is already over the bound, and no entry of it may be made.
	ports := make([]discoveryv1.EndpointPort, 20)
	for i := range ports {
		ports[i] = discoveryv1.EndpointPort{Name: ptr(fmt.Sprintf("p%d", i)), Port: ptr(int32(1000 + i))}
	}
	eps := make([]discoveryv1.Endpoint, 1000)
	for i := range eps {
		eps[i] = ep(fmt.Sprintf("10.1.%d.%d", i/256, i%256), yes, yes, no, "")
	}
	big := sliceObj("shop", "web-big", "web", discoveryv1.AddressTypeIPv4, ports, eps...)
	s, err := newSlice(big, naming{}, defaultCheck(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.eps) != 0 || len(s.items) != 0 || !strings.Contains(s.dropped.String(), "1000 endpoints times 20 ports is over the 10000 entries a slice may make") {
		t.Fatalf("%d entries made, dropped %q: want none made and the slice dropped whole", len(s.eps), s.dropped.String())
	}
	allocs := testing.AllocsPerRun(3, func() { _, _ = newSlice(big, naming{}, defaultCheck(t)) })
	if allocs > 100 {
		t.Fatalf("%v allocations to drop the slice: its entries were made", allocs)
	}
	// The rest of the Service is served.
	got := load(t, []*corev1.Service{webService()}, []*discoveryv1.EndpointSlice{
		big, sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, httpPort(8080), ep("10.0.0.1", yes, yes, no, "")),
	})
	want := map[string][]model.Endpoint{"shop/web:http": {{Address: "10.0.0.1", Port: 8080, Health: "healthy"}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("services (-want +got):\n%s", d)
	}
}

func TestSlicePortsOutOfRangeAreDroppedAndTheRestServed(t *testing.T) {
	ports := []discoveryv1.EndpointPort{
		{Name: ptr("zero"), Port: ptr(int32(0))}, {Name: ptr("neg"), Port: ptr(int32(-1))},
		{Name: ptr("big"), Port: ptr(int32(70000))}, {Name: ptr("http"), Port: ptr(int32(8080))},
	}
	svc := svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80}, corev1.ServicePort{Name: "zero", Port: 81},
		corev1.ServicePort{Name: "neg", Port: 82}, corev1.ServicePort{Name: "big", Port: 83})
	sl := sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", yes, yes, no, ""))
	got := load(t, []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{sl})
	want := map[string][]model.Endpoint{
		"shop/web:http": {{Address: "10.0.0.1", Port: 8080, Health: "healthy"}},
		"shop/web:zero": {}, "shop/web:neg": {}, "shop/web:big": {},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("services (-want +got):\n%s", d)
	}
	s, _ := newSlice(sl, naming{}, defaultCheck(t))
	if s.dropped.n != 3 || !strings.Contains(s.dropped.String(), `port "big" is 70000, not 1 to 65535`) {
		t.Fatalf("dropped %d: %q, want the three ports named", s.dropped.n, s.dropped.String())
	}
}

func TestCloudMetadataAddressesAreNotServedByDefault(t *testing.T) {
	sl := sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, httpPort(8080),
		ep("169.254.169.254", yes, yes, no, ""), ep("168.63.129.16", yes, yes, no, ""),
		ep("100.100.100.200", yes, yes, no, ""), ep("10.0.0.1", yes, yes, no, ""))
	v6 := sliceObj("shop", "web-b", "web", discoveryv1.AddressTypeIPv6, httpPort(8080),
		ep("fd00:ec2::254", yes, yes, no, ""), ep("::ffff:169.254.169.254", yes, yes, no, ""), ep("fd00::1", yes, yes, no, ""))
	got := load(t, []*corev1.Service{webService()}, []*discoveryv1.EndpointSlice{sl, v6})
	want := map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.1", Port: 8080, Health: "healthy"}, {Address: "fd00::1", Port: 8080, Health: "healthy"},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("services (-want +got):\n%s", d)
	}
}

func TestOnlyAllowedAddressesAreServedAndDenyWins(t *testing.T) {
	c, err := newCheck(Options{AllowCIDRs: []string{"10.0.0.0/8"}, DenyCIDRs: []string{"10.9.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSlice(sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, httpPort(8080),
		ep("10.0.0.1", yes, yes, no, ""), ep("10.9.0.1", yes, yes, no, ""), ep("192.168.0.1", yes, yes, no, "")), naming{}, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.eps) != 1 || s.eps[0].Address != "10.0.0.1" || s.dropped.n != 2 {
		t.Fatalf("served %+v, dropped %q: want 10.0.0.1 alone", s.eps, s.dropped.String())
	}
	if _, err := newCheck(Options{DenyCIDRs: []string{"10.0.0.0/33"}}); err == nil || !strings.Contains(err.Error(), "--kube-deny-cidrs") {
		t.Fatalf("err %v, want a bad CIDR refused naming the flag", err)
	}
}

func TestSlicesNotMadeByTheControllerAreDroppedUnlessForeignSlicesAreServed(t *testing.T) {
	manual := sliceObj("shop", "web-manual", "web", discoveryv1.AddressTypeIPv4, httpPort(8080), ep("10.0.0.7", yes, yes, no, ""))
	delete(manual.Labels, labelManagedBy)
	s, _ := newSlice(manual, naming{}, defaultCheck(t))
	if len(s.eps) != 0 || !strings.Contains(s.dropped.String(), "not made by the EndpointSlice controller") {
		t.Fatalf("served %+v, dropped %q: want the manual slice dropped", s.eps, s.dropped.String())
	}
	c := defaultCheck(t)
	c.foreign = true
	if s, _ := newSlice(manual, naming{}, c); len(s.eps) != 1 || s.dropped.n != 0 {
		t.Fatalf("with foreign slices served: %+v, dropped %q", s.eps, s.dropped.String())
	}
}

func TestAZoneOverALabelsLengthIsDroppedAndTheEndpointServed(t *testing.T) {
	long := strings.Repeat("z", 100_000)
	got := load(t, []*corev1.Service{webService()}, []*discoveryv1.EndpointSlice{
		sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, httpPort(8080),
			ep("10.0.0.1", yes, yes, no, long), ep("10.0.0.2", yes, yes, no, strings.Repeat("z", 63))),
	})
	want := map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.1", Port: 8080, Health: "healthy"},
		{Address: "10.0.0.2", Port: 8080, Health: "healthy", Zone: strings.Repeat("z", 63)},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("services (-want +got):\n%s", d)
	}
}

func TestServicesPastMaxServicesAreDroppedAndTheRestServed(t *testing.T) {
	ss, sl := manySlices(3, 1)
	r := render("kubernetes/test", ss, sl, bounds{endpoints: DefaultMaxEndpoints, services: 2})
	if d := r.dropped["kubernetes/test"]; d.n != 1 || !strings.Contains(d.String(), "service shop/web2:http: over the 2 services served") {
		t.Fatalf("dropped %d: %q, want shop/web2:http", d.n, d.String())
	}
	if len(r.files) != 3 {
		t.Fatalf("%d files, want the services and web0's and web1's slices", len(r.files))
	}
}

func TestTheSlicesHeldAreBoundedWhateverAClusterSends(t *testing.T) {
	src := &Source{opts: Options{MaxEndpoints: 3}, check: defaultCheck(t)}
	c := &cluster{name: "test", services: map[key]*service{}, slices: map[key]*slice{}}
	src.clusters = []*cluster{c}
	for i := range 5 {
		src.setSlice(c, sliceObj("shop", fmt.Sprintf("web-%d", i), "web", discoveryv1.AddressTypeIPv4, httpPort(8080),
			ep(fmt.Sprintf("10.0.%d.1", i), yes, yes, no, ""), ep(fmt.Sprintf("10.0.%d.2", i), yes, yes, no, "")))
	}
	held := 0
	for _, s := range c.slices {
		held += len(s.eps)
	}
	if held != 6 || src.held != 6 {
		t.Fatalf("%d endpoints held (counted %d), want 6: twice MaxEndpoints", held, src.held)
	}
	src.deleteSlice(c, key{"shop", "web-0"})
	src.setSlice(c, sliceObj("shop", "web-4", "web", discoveryv1.AddressTypeIPv4, httpPort(8080), ep("10.0.4.1", yes, yes, no, "")))
	if src.held != 5 {
		t.Fatalf("counted %d held after a delete and a change, want 5", src.held)
	}
}

func TestClientGosLogGoesToTheDaemonsLogger(t *testing.T) {
	var buf bytes.Buffer
	LogThrough(slog.New(slog.NewTextHandler(&buf, nil)))
	defer klog.ClearLogger()
	klog.ErrorS(errors.New("watch refused"), "Failed to watch", "reflector", "services")
	klog.Flush()
	if !strings.Contains(buf.String(), "Failed to watch") || !strings.Contains(buf.String(), "from=client-go") {
		t.Fatalf("the daemon's log holds %q: want client-go's line", buf.String())
	}
}
