package kube

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/kube/kubetest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// rbacManifest is the shipped RBAC: the tests' source runs with exactly it.
const rbacManifest = "../../../deploy/kubernetes/pylon-kube-source-rbac.yaml"

// bound caps every wait of these tests.
const bound = 30 * time.Second

// services is what an update's files load to: each service's endpoints.
func services(t *testing.T, u source.Update) map[string][]model.Endpoint {
	t.Helper()
	if u.Err != nil {
		t.Fatalf("update with an error: %v", u.Err)
	}
	doc, err := config.Load(xdstype.New(), u.Files)
	if err != nil {
		t.Fatalf("the files do not load: %v", err)
	}
	if p := doc.JoinEndpoints(); len(p) > 0 {
		t.Fatalf("the endpoints do not join: %v", p)
	}
	out := map[string][]model.Endpoint{}
	for _, s := range doc.Services {
		out[s.Name] = append([]model.Endpoint{}, s.Endpoints...)
	}
	return out
}

// await reads updates until one loads to want, within bound.
func await(t *testing.T, updates <-chan source.Update, want map[string][]model.Endpoint) {
	t.Helper()
	timeout := time.After(bound)
	var last map[string][]model.Endpoint
	for {
		select {
		case u := <-updates:
			if last = services(t, u); cmp.Equal(want, last) {
				return
			}
		case <-timeout:
			t.Fatalf("no update to the services wanted within %v; the last (-want +got):\n%s", bound, cmp.Diff(want, last))
		}
	}
}

func TestServicesAndSlicesCreatedThroughTheAPIBecomeServices(t *testing.T) {
	k := kubetest.Start(t)
	k.Grant(rbacManifest, kubetest.Pylon)
	admin := k.Clientset(kubetest.Admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
	defer cancel()

	// Its own namespace, watched alone (--kube-namespaces): default
	// holds the apiserver's own Service, kubernetes.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := admin.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sl := sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: tcp}},
		ep("10.0.0.1", yes, yes, no, "z1"))
	sl, err := admin.DiscoveryV1().EndpointSlices("shop").Create(ctx, sl, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	updates := run(t, k, Options{Cluster: "test", Namespaces: []string{"shop"}})
	await(t, updates, map[string][]model.Endpoint{"shop/web:http": {{Address: "10.0.0.1", Port: 8080, Zone: "z1", Health: "healthy"}}})

	// A slice update: a second endpoint, the first one terminating but
	// still serving.
	sl.Endpoints = []discoveryv1.Endpoint{ep("10.0.0.1", no, yes, yes, "z1"), ep("10.0.0.2", yes, yes, no, "z2")}
	if _, err := admin.DiscoveryV1().EndpointSlices("shop").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, updates, map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.1", Port: 8080, Zone: "z1", Health: "draining"},
		{Address: "10.0.0.2", Port: 8080, Zone: "z2", Health: "healthy"},
	}})

	// The Service deleted: its service goes, though its slice lingers
	// (no controller collects it here).
	if err := admin.CoreV1().Services("shop").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, updates, map[string][]model.Endpoint{})
}

// run runs a source for k as the pylon user with opts until the test ends,
// and returns its updates.
func run(t *testing.T, k *kubetest.Server, opts Options) <-chan source.Update {
	t.Helper()
	opts.Kubeconfig = k.Kubeconfig(kubetest.Pylon)
	if opts.Quiet == 0 {
		opts.Quiet = 20 * time.Millisecond
	}
	src, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	updates := make(chan source.Update)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, updates) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return updates
}

func TestSelectorAndNamespacesLimitWhatIsWatched(t *testing.T) {
	k := kubetest.Start(t)
	k.Grant(rbacManifest, kubetest.Pylon)
	admin := k.Clientset(kubetest.Admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
	defer cancel()
	exposed := map[string]string{"pylon.dev/expose": "true"}
	for _, ns := range []string{"shop", "other"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"web", "hidden"} {
			svc := svcObj(ns, name, corev1.ServicePort{Name: "http", Port: 80})
			sl := sliceObj(ns, name+"-a", name, discoveryv1.AddressTypeIPv4,
				[]discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}}, ep("10.0.0.1", yes, yes, no, ""))
			if name == "web" {
				// The endpoints' controller copies a Service's labels to
				// its slices.
				svc.Labels = exposed
				sl.Labels["pylon.dev/expose"] = "true"
			}
			if _, err := admin.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := admin.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	updates := run(t, k, Options{Namespaces: []string{"shop"}, Selector: "pylon.dev/expose=true"})
	await(t, updates, map[string][]model.Endpoint{"shop/web:http": {{Address: "10.0.0.1", Port: 8080, Health: "healthy"}}})

	// A dual-stack Service's IPv6 slice joins the same endpoint set.
	v6 := sliceObj("shop", "web-b", "web", discoveryv1.AddressTypeIPv6,
		[]discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}}, ep("fd00::1", yes, yes, no, ""))
	v6.Labels["pylon.dev/expose"] = "true"
	if _, err := admin.DiscoveryV1().EndpointSlices("shop").Create(ctx, v6, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, updates, map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.1", Port: 8080, Health: "healthy"}, {Address: "fd00::1", Port: 8080, Health: "healthy"},
	}})
}

func TestAfterSyncRunSendsWhatWasListedWhileTheAPIIsAway(t *testing.T) {
	k := kubetest.Start(t)
	k.Grant(rbacManifest, kubetest.Pylon)
	admin := k.Clientset(kubetest.Admin)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Services("shop").Create(ctx, svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src, err := New(Options{Kubeconfig: k.Kubeconfig(kubetest.Pylon), Namespaces: []string{"shop"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	k.Stop()
	updates := make(chan source.Update)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx, updates) }()
	defer func() { stop(); <-done }()
	select {
	case u := <-updates:
		if got := services(t, u); !cmp.Equal(got, map[string][]model.Endpoint{"shop/web:http": {}}) {
			t.Fatalf("sent %v, want what Sync listed", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run sent nothing within 5s while the API server is away: a source merged with it would be held back")
	}
}

func TestWhatTheAPIAcceptsButCannotBeServedIsDroppedAndTheRestServed(t *testing.T) {
	k := kubetest.Start(t)
	k.Grant(rbacManifest, kubetest.Pylon)
	admin := k.Clientset(kubetest.Admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
	defer cancel()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80}, corev1.ServicePort{Name: "big", Port: 81})
	if _, err := admin.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slices := []*discoveryv1.EndpointSlice{
		// Ports the API accepts: 0, -1 and 70000.
		sliceObj("shop", "web-ports", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{
			{Name: ptr("zero"), Port: ptr(int32(0))}, {Name: ptr("neg"), Port: ptr(int32(-1))},
			{Name: ptr("big"), Port: ptr(int32(70000))}, {Name: ptr("http"), Port: ptr(int32(8080))},
		}, ep("10.0.0.1", yes, yes, no, "")),
		// Cloud metadata addresses (the API refuses 169.254.0.0/16 alone), and
		// a zone of 100 KB.
		sliceObj("shop", "web-meta", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
			ep("168.63.129.16", yes, yes, no, ""), ep("100.100.100.200", yes, yes, no, ""), ep("10.0.0.2", yes, yes, no, strings.Repeat("z", 100_000))),
		sliceObj("shop", "web-meta6", "web", discoveryv1.AddressTypeIPv6, []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
			ep("fd00:ec2::254", yes, yes, no, "")),
	}
	// A slice not made by the EndpointSlice controller.
	manual := sliceObj("shop", "web-manual", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}}, ep("10.0.0.9", yes, yes, no, ""))
	delete(manual.Labels, labelManagedBy)
	// 1,000 endpoints by 20,000 ports: twenty million entries, if made.
	ports := make([]discoveryv1.EndpointPort, 20_000)
	for i := range ports {
		ports[i] = discoveryv1.EndpointPort{Name: ptr(fmt.Sprintf("p%d", i)), Port: ptr(int32(1 + i))}
	}
	eps := make([]discoveryv1.Endpoint, 1000)
	for i := range eps {
		eps[i] = discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/256, i%256)}}
	}
	huge := sliceObj("shop", "web-huge", "web", discoveryv1.AddressTypeIPv4, ports, eps...)
	for _, sl := range append(slices, manual, huge) {
		if _, err := admin.DiscoveryV1().EndpointSlices("shop").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the API refuses slice %s: %v", sl.Name, err)
		}
	}
	src, updates := runClusters(t, Options{Kubeconfig: k.Kubeconfig(kubetest.Pylon)})
	await(t, updates, map[string][]model.Endpoint{
		"shop/web:http": {{Address: "10.0.0.2", Port: 8080, Health: "healthy"}, {Address: "10.0.0.1", Port: 8080, Health: "healthy"}},
		"shop/web:big":  {},
	})
	st := src.Status().Kubernetes[0]
	if st.Dropped < 8 || !strings.Contains(st.DroppedNote, "web-huge") {
		t.Fatalf("status: %d dropped, %q; want the ports, addresses, zone and slices counted", st.Dropped, st.DroppedNote)
	}
}
