package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/kube/kubetest"
)

// shopCluster is a real apiserver with the shipped RBAC granted to Pylon
// and the Service shop/web holding one slice of one endpoint at addr in
// zone.
func shopCluster(t *testing.T, addr, zone string) (*kubetest.Server, *kubernetes.Clientset) {
	t.Helper()
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
	putSlice(t, admin, addr, zone)
	return k, admin
}

// putSlice creates or replaces shop/web's slice web-a: one endpoint at
// addr in zone.
func putSlice(t *testing.T, admin *kubernetes.Clientset, addr, zone string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	sl := sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: tcp}}, ep(addr, yes, yes, no, zone))
	api := admin.DiscoveryV1().EndpointSlices("shop")
	if old, err := api.Get(ctx, "web-a", metav1.GetOptions{}); err == nil {
		sl.ResourceVersion = old.ResourceVersion
		if _, err := api.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := api.Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runClusters runs a source of the unnamed cluster first (if given) and
// named ones, as the pylon user, until the test ends.
func runClusters(t *testing.T, opts Options) (*Source, <-chan source.Update) {
	t.Helper()
	opts.Quiet, opts.Probe = 20*time.Millisecond, 100*time.Millisecond
	if opts.Namespaces == nil {
		opts.Namespaces = []string{"shop"}
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
	return src, updates
}

func TestTheSameServiceInSeveralClustersIsOneServiceWithEachClustersEndpointsInItsRegion(t *testing.T) {
	a, _ := shopCluster(t, "10.0.0.1", "z1")
	b, _ := shopCluster(t, "10.1.0.1", "z1")
	_, updates := runClusters(t, Options{Kubeconfig: a.Kubeconfig(kubetest.Pylon), Named: []Named{{Name: "west", Kubeconfig: b.Kubeconfig(kubetest.Pylon)}}})
	await(t, updates, map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.1", Port: 8080, Zone: "z1", Health: "healthy"},
		{Address: "10.1.0.1", Port: 8080, Region: "west", Zone: "z1", Health: "healthy"},
	}})
}

func TestClustersKeptApartNameTheirServicesAfterTheCluster(t *testing.T) {
	a, _ := shopCluster(t, "10.0.0.1", "z1")
	b, _ := shopCluster(t, "10.1.0.1", "z1")
	_, updates := runClusters(t, Options{Separate: true, Named: []Named{
		{Name: "east", Kubeconfig: a.Kubeconfig(kubetest.Pylon)}, {Name: "west", Kubeconfig: b.Kubeconfig(kubetest.Pylon)},
	}})
	await(t, updates, map[string][]model.Endpoint{
		"east/shop/web:http": {{Address: "10.0.0.1", Port: 8080, Region: "east", Zone: "z1", Health: "healthy"}},
		"west/shop/web:http": {{Address: "10.1.0.1", Port: 8080, Region: "west", Zone: "z1", Health: "healthy"}},
	})
}

// awaitCluster waits, within bound, until src says cluster is connected
// (or not), and returns its state.
func awaitCluster(t *testing.T, src *Source, name string, connected bool) source.ClusterStatus {
	t.Helper()
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last source.ClusterStatus
	for time.Now().Before(deadline) {
		for _, c := range src.Status().Kubernetes {
			if c.Name == name {
				last = c
			}
		}
		if last.Connected == connected {
			return last
		}
		<-tick.C
	}
	t.Fatalf("cluster %s not connected=%v within %v: %+v", name, connected, bound, last)
	return last
}

func TestAClusterAwayKeepsItsEndpointsAndSaysSoUntilItIsBack(t *testing.T) {
	a, adminA := shopCluster(t, "10.0.0.1", "z1")
	b, adminB := shopCluster(t, "10.1.0.1", "z1")
	src, updates := runClusters(t, Options{Named: []Named{
		{Name: "east", Kubeconfig: a.Kubeconfig(kubetest.Pylon)}, {Name: "west", Kubeconfig: b.Kubeconfig(kubetest.Pylon)},
	}})
	both := func(east string) map[string][]model.Endpoint {
		return map[string][]model.Endpoint{"shop/web:http": {
			{Address: east, Port: 8080, Region: "east", Zone: "z1", Health: "healthy"},
			{Address: "10.1.0.1", Port: 8080, Region: "west", Zone: "z1", Health: "healthy"},
		}}
	}
	await(t, updates, both("10.0.0.1"))
	awaitCluster(t, src, "west", true)

	b.Stop()
	st := awaitCluster(t, src, "west", false)
	if st.LastError == "" || strings.Contains(st.LastError, "kubetest-pylon-token") {
		t.Fatalf("west's last error is %q: want the cause, without the token", st.LastError)
	}
	// East's change is served with west's last endpoints.
	putSlice(t, adminA, "10.0.0.2", "z1")
	await(t, updates, both("10.0.0.2"))
	if east := awaitCluster(t, src, "east", true); !east.LastContact.After(st.Since) {
		t.Fatalf("east's last contact %v is not after west went away (%v)", east.LastContact, st.Since)
	}

	b.Restart()
	awaitCluster(t, src, "west", true)
	putSlice(t, adminB, "10.1.0.2", "z2")
	await(t, updates, map[string][]model.Endpoint{"shop/web:http": {
		{Address: "10.0.0.2", Port: 8080, Region: "east", Zone: "z1", Health: "healthy"},
		{Address: "10.1.0.2", Port: 8080, Region: "west", Zone: "z2", Health: "healthy"},
	}})
}

func TestAClusterNameMustBeAShortDNSLabel(t *testing.T) {
	for _, bad := range []string{"", "West", "a_b", "-a", "a-", strings.Repeat("a", 33), "a/b", "cluster"} {
		_, err := New(Options{Kubeconfig: "/nonexistent", Named: []Named{{Name: bad, Kubeconfig: "/nonexistent"}}})
		if err == nil || !strings.Contains(err.Error(), "--kube-cluster") {
			t.Errorf("name %q: err %v, want one naming --kube-cluster", bad, err)
		}
	}
}

func TestAClusterThatRefusesListsWhileReadyIsDegradedUntilAllowed(t *testing.T) {
	k := kubetest.Start(t)
	// No RBAC yet: /readyz answers, every list is forbidden.
	src, _ := runClusters(t, Options{Kubeconfig: k.Kubeconfig(kubetest.Pylon)})
	deadline := time.Now().Add(bound)
	var st source.ClusterStatus
	for st = src.Status().Kubernetes[0]; !(st.Connected && st.Degraded) && time.Now().Before(deadline); st = src.Status().Kubernetes[0] {
		time.Sleep(20 * time.Millisecond)
	}
	if !st.Connected || !st.Degraded || !strings.Contains(st.LastError, "forbidden") {
		t.Fatalf("status %+v: want connected, degraded, the refusal its last error", st)
	}
	k.Grant(rbacManifest, kubetest.Pylon)
	for st = src.Status().Kubernetes[0]; st.Degraded && time.Now().Before(deadline.Add(bound)); st = src.Status().Kubernetes[0] {
		time.Sleep(20 * time.Millisecond)
	}
	if st.Degraded || !st.Connected {
		t.Fatalf("status %+v: want connected and no longer degraded once allowed", st)
	}
}
