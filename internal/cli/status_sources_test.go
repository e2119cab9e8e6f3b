package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/source"
)

// pylon status heads with each Kubernetes cluster that is away (its last
// endpoints still served) and says nothing of the connected ones.
func TestStatusSaysWhichKubernetesClusterIsAway(t *testing.T) {
	since := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	st := source.Status{Kubernetes: []source.ClusterStatus{
		{Name: "east", Connected: true, Since: since.Add(-time.Hour), LastContact: since.Add(time.Minute)},
		{Name: "west", Since: since, LastContact: since.Add(-5 * time.Second), LastError: "dial tcp 127.0.0.1:6443: connect: connection refused\x1b[2J"},
	}}
	var out bytes.Buffer
	writeSources(&out, st)
	for _, w := range []string{
		"KUBERNETES CLUSTER west UNREACHABLE since 2026-12-06T19:00:00Z: dial tcp 127.0.0.1:6443: connect: connection refused\\x1b[2J\n",
		"still serving its last services and endpoints (as of 2026-12-06T18:59:55Z)",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("status lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "east") {
		t.Errorf("status names the connected cluster east:\n%s", out.String())
	}
}

// A reachable cluster that refuses the source's lists is degraded: said,
// with its refusal.
func TestStatusSaysWhichKubernetesClusterIsDegraded(t *testing.T) {
	at := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	st := source.Status{Kubernetes: []source.ClusterStatus{
		{Name: "east", Connected: true, Degraded: true, LastErrorAt: at, LastError: `endpointslices.discovery.k8s.io is forbidden: User "pylon" cannot list`},
	}}
	var out bytes.Buffer
	writeSources(&out, st)
	want := `KUBERNETES CLUSTER east DEGRADED since 2026-12-06T19:00:00Z: lists or watches refused: endpointslices.discovery.k8s.io is forbidden: User "pylon" cannot list` + "\n"
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "still serving its last services and endpoints") {
		t.Errorf("status lacks %q:\n%s", want, out.String())
	}
}
