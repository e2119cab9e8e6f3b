package kube

import (
	"context"
	"fmt"
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

// shopNamespace starts an apiserver with the shop namespace and returns
// it with an admin client's context, bounded.
func shopNamespace(t *testing.T) (*kubetest.Server, context.Context) {
	t.Helper()
	k := kubetest.Start(t)
	k.Grant(rbacManifest, kubetest.Pylon)
	ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	if _, err := k.Clientset(kubetest.Admin).CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return k, ctx
}

// A change after a quiet spell is sent at once, not after the quiet
// period (--debounce): a lone change is not a burst to fold.
func TestAChangeAfterAQuietSpellIsSentAtOnce(t *testing.T) {
	const quiet = 5 * time.Second
	k, ctx := shopNamespace(t)
	updates := run(t, k, Options{Cluster: "test", Namespaces: []string{"shop"}, Quiet: quiet})
	await(t, updates, map[string][]model.Endpoint{})

	begin := time.Now()
	svc := svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80})
	if _, err := k.Clientset(kubetest.Admin).CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, updates, map[string][]model.Endpoint{"shop/web:http": {}})
	if took := time.Since(begin); took > quiet/2 {
		t.Fatalf("the Service was sent %v after its creation, want well within the quiet period of %v", took.Round(time.Millisecond), quiet)
	}
}

// A burst of changes (a slice updated again and again) is sent at most
// once per Spacing (the daemon's grows with the proxies a publish
// reaches) after the first, and its last state is sent.
func TestABurstOfChangesIsSentOncePerSpacing(t *testing.T) {
	const spacing = 400 * time.Millisecond
	k, ctx := shopNamespace(t)
	admin := k.Clientset(kubetest.Admin)
	svc := svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80})
	if _, err := admin.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	port := []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: tcp}}
	sl, err := admin.DiscoveryV1().EndpointSlices("shop").Create(ctx, sliceObj("shop", "web-a", "web", discoveryv1.AddressTypeIPv4, port, ep("10.0.0.1", yes, yes, no, "")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updates := run(t, k, Options{Cluster: "test", Namespaces: []string{"shop"}, Spacing: func() time.Duration { return spacing }})
	await(t, updates, map[string][]model.Endpoint{"shop/web:http": {{Address: "10.0.0.1", Port: 8080, Health: "healthy"}}})

	// The updates are read as they come, so that the source is never
	// held back by the test.
	const changes = 30
	last := map[string][]model.Endpoint{"shop/web:http": {{Address: fmt.Sprintf("10.0.0.%d", changes+1), Port: 8080, Health: "healthy"}}}
	counted := make(chan int, 1)
	go func() { counted <- countUntil(t, updates, last) }()
	begin := time.Now()
	for i := 2; i <= changes+1; i++ {
		sl.Endpoints = []discoveryv1.Endpoint{ep(fmt.Sprintf("10.0.0.%d", i), yes, yes, no, "")}
		if sl, err = admin.DiscoveryV1().EndpointSlices("shop").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	burst := time.Since(begin)
	n := <-counted
	// One at once, one per spacing the burst lasted, one for its tail.
	if limit := 2 + int(burst/spacing); n > limit {
		t.Fatalf("%d changes over %v were sent in %d updates, want at most %d (one per %v)", changes, burst.Round(time.Millisecond), n, limit, spacing)
	}
}

// countUntil counts the updates until one that loads to want, within
// bound (0 if none did: the failure is said then).
func countUntil(t *testing.T, updates <-chan source.Update, want map[string][]model.Endpoint) int {
	timeout := time.After(bound)
	for n := 1; ; n++ {
		select {
		case u := <-updates:
			if u.Err == nil && cmp.Equal(want, servicesOf(u)) {
				return n
			}
		case <-timeout:
			t.Errorf("no update to the services wanted within %v", bound)
			return 0
		}
	}
}

// servicesOf is services without a test to fail: nil for an update that
// does not load (countUntil reads updates off the test's goroutine).
func servicesOf(u source.Update) map[string][]model.Endpoint {
	doc, err := config.Load(xdstype.New(), u.Files)
	if err != nil || len(doc.JoinEndpoints()) > 0 {
		return nil
	}
	out := map[string][]model.Endpoint{}
	for _, s := range doc.Services {
		out[s.Name] = append([]model.Endpoint{}, s.Endpoints...)
	}
	return out
}
