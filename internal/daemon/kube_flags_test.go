package daemon

import (
	"strings"
	"testing"
)

func TestKubeClusterIsANameAndAKubeconfig(t *testing.T) {
	got, err := kubeClusters([]string{"east=/etc/east.kubeconfig", "west=/k/w=x"})
	if err != nil || len(got) != 2 || got[0].Name != "east" || got[1].Kubeconfig != "/k/w=x" {
		t.Fatalf("kubeClusters: %+v, %v", got, err)
	}
	for _, bad := range []string{"east", "east=", "=/f", "East=/f", "a b=/f"} {
		if _, err := kubeClusters([]string{bad}); err == nil || !strings.Contains(err.Error(), "--kube-cluster") {
			t.Errorf("%q: err %v, want one naming --kube-cluster", bad, err)
		}
	}
	if _, err := newKube(Options{Kube: KubeOptions{Clusters: []string{"east=/f"}, Merge: "both"}}, nil, nil); err == nil || !strings.Contains(err.Error(), "--kube-merge") {
		t.Errorf("--kube-merge both: err %v, want one naming --kube-merge", err)
	}
}

func TestKubeCIDRsAreCheckedAtStart(t *testing.T) {
	for _, flag := range []string{"--kube-deny-cidrs", "--kube-allow-cidrs"} {
		k := KubeOptions{Clusters: []string{"east=/nonexistent"}}
		if flag == "--kube-deny-cidrs" {
			k.DenyCIDRs = []string{"10.0.0.0/33"}
		} else {
			k.AllowCIDRs = []string{"pods"}
		}
		if _, err := newKube(Options{Kube: k}, nil, nil); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: err %v, want one naming the flag", flag, err)
		}
	}
}
