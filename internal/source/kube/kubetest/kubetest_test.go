package kubetest_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pylon-xds/pylon/internal/source/kube/kubetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartServesTheAPIAndRBACHoldsThePylonUser(t *testing.T) {
	s := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := s.Clientset(kubetest.Admin)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creating a Service: %v", err)
	}
	_, err := s.Clientset(kubetest.Pylon).CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the pylon user, bound to nothing, listing Services: %v, want Forbidden", err)
	}
}
