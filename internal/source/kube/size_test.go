package kube

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// clusterAtBounds renders a cluster at the source's default bounds:
// services of 100 endpoints each, 200,000 endpoints in all, IPv4 with
// zones, under long names (a namespace of 63 bytes, Services of 56).
func clusterAtBounds(t *testing.T) []config.File {
	t.Helper()
	const per = 100
	ss, sl := map[key]*service{}, map[key]*slice{}
	ns := strings.Repeat("n", 63)
	for i := range DefaultMaxEndpoints / per {
		name := fmt.Sprintf("%s-%05d", strings.Repeat("s", 50), i)
		r, err := newService(svcObj(ns, name, corev1.ServicePort{Name: "http-metrics", Port: 80}), naming{})
		if err != nil {
			t.Fatal(err)
		}
		ss[key{ns, name}] = r
		eps := make([]discoveryv1.Endpoint, per)
		for j := range eps {
			eps[j] = ep(fmt.Sprintf("10.%d.%d.%d", i/256%256, i%256, j), yes, yes, no, "europe-west4-a")
		}
		s, err := newSlice(sliceObj(ns, name+"-abcde", name, discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{{Name: ptr("http-metrics"), Port: ptr(int32(8080))}}, eps...), naming{}, check{})
		if err != nil {
			t.Fatal(err)
		}
		sl[key{ns, name + "-abcde"}] = s
	}
	r := render("kubernetes/cluster", ss, sl, defaultBounds)
	if d := r.dropped["kubernetes/cluster"]; d.n > 0 {
		t.Fatalf("the cluster at its bounds had %d objects dropped: %s", d.n, d)
	}
	return r.files
}

// paddedFile is an own config file of n bytes that serves nothing.
func paddedFile(path string, n int) config.File {
	var b bytes.Buffer
	b.WriteString(`{"resources": []`)
	b.Write(bytes.Repeat([]byte(" "), n-len(`{"resources": []}`)-1))
	b.WriteString("}\n")
	return config.File{Path: path, Data: b.Bytes()}
}

func TestAClusterAtItsBoundsLeavesTheOwnFilesTheirWholeRoom(t *testing.T) {
	if testing.Short() {
		t.Skip("renders 200,000 endpoints")
	}
	cluster := clusterAtBounds(t)
	size := 0
	for _, f := range cluster {
		size += len(f.Data)
	}
	// The own files at 24 MiB and the cluster together are over the
	// total the own files may hold.
	own := []config.File{paddedFile("a.json", 12<<20), paddedFile("b.json", 12<<20)}
	if 24<<20+size <= config.MaxTotalBytes {
		t.Fatalf("the cluster's files hold %d MiB: not enough to test", size>>20)
	}
	t.Logf("the cluster's %d files hold %d MiB", len(cluster), size>>20)
	if _, err := config.Load(xdstype.New(), append(own, cluster...)); err != nil {
		t.Fatalf("24 MiB of own files with the cluster's %d MiB refused: %v", size>>20, err)
	}
	// The own files alone are bounded as ever.
	own = append(own, paddedFile("c.json", 15<<20), paddedFile("d.json", 15<<20), paddedFile("e.json", 11<<20))
	_, err := config.Load(xdstype.New(), append(own, cluster...))
	if err == nil || !strings.Contains(err.Error(), "the 5 config files hold") || !strings.Contains(err.Error(), "over the 64 MiB limit") {
		t.Fatalf("65 MiB of own files with the cluster's: %v, want the 5 own files refused over the 64 MiB limit", err)
	}
}
