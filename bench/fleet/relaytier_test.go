package main

import (
	"net"
	"net/http"
	"testing"
)

func TestCheckTierRefusesARelayOverAServerThatIsNotADaemon(t *testing.T) {
	for _, c := range []struct {
		tier, impls string
		scenario    bool
		ok          bool
	}{
		{"direct", "pylon,gcp", false, true},
		{"direct,relay", "pylon-api", false, true},
		{"relay", "pylon-file,pylon-api", false, true},
		{"relay", "pylon-api@/tmp/other", false, true},
		{"relay", "pylon", false, false},
		{"relay", "pylon-api,gcp", false, false},
		{"relay", "pylon-api", true, false},
		{"direct", "pylon", true, true},
		{"edge", "pylon-api", false, false},
	} {
		if got := checkTier(c.tier, c.impls, c.scenario); (got == "") != c.ok {
			t.Errorf("checkTier(%q, %q, %v) = %q", c.tier, c.impls, c.scenario, got)
		}
	}
}

func TestMetricSumAddsEveryLabelsSample(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("# TYPE pylon_xds_streams gauge\npylon_xds_streams{kind=\"ads\"} 2\npylon_xds_streams{kind=\"ads_delta\"} 1\n" +
			"# TYPE pylon_relay_upstream_streams_total counter\npylon_relay_upstream_streams_total 4\n"))
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Close()
	addr := lis.Addr().String()
	for name, want := range map[string]float64{"pylon_xds_streams": 3, "pylon_relay_upstream_streams_total": 4, "absent": 0} {
		if got := metricSum(addr, name); got != want {
			t.Errorf("metricSum(%s) = %v, want %v", name, got, want)
		}
	}
	srv.Close()
	if got := metricSum(addr, "pylon_xds_streams"); got != -1 {
		t.Errorf("metricSum of a closed server = %v, want -1", got)
	}
}
