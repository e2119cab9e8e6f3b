package relay_test

import (
	"context"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	gcpserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// plantedKey is a private key the upstream puts inline in a Cluster.
const plantedKey = "-----BEGIN PRIVATE KEY-----\nPLANTEDRELAYKEYMARKER\n-----END PRIVATE KEY-----\n"

func clusterNamed(t *testing.T, name string, withKey bool) *clusterv3.Cluster {
	cl := &clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(1e9),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	if withKey {
		tc := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{{
			PrivateKey: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: plantedKey}},
		}}}}
		a, err := anypb.New(tc)
		if err != nil {
			t.Fatal(err)
		}
		cl.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
	}
	return cl
}

// A resource the relay holds back (here a Cluster with a private key
// inline) is served at its previous good version, and that version, not
// the held-back one, is what the data folder keeps: the key never reaches
// the disk, and a relay restarted with the upstream unchanged still
// serves the good version (resuming with its version, so the upstream
// sends the new one again, to be held back again).
func TestRelayKeepsTheServedVersionOfAHeldBackResource(t *testing.T) {
	c := cache.NewSnapshotCache(false, byCluster{}, nil)
	set := func(v string, withKey bool, more ...types.Resource) {
		snap, err := cache.NewSnapshot(v, map[resource.Type][]types.Resource{resource.ClusterType: append([]types.Resource{clusterNamed(t, "svc", withKey)}, more...)})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetSnapshot(context.Background(), "east", snap); err != nil {
			t.Fatal(err)
		}
	}
	set("v1", false)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, gcpserver.NewServer(ctx, c, nil))
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(lis) }()
	t.Cleanup(func() { cancel(); g.Stop(); <-done })

	rd := startRelay(t, []string{lis.Addr().String()}, "", daemon.RelayOptions{Key: "{cluster}"})
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, rd.xds), &corev3.Node{Id: "p1", Cluster: "east"})
	s.Subscribe(xdstype.ClusterURL, "*")
	s.ACK(s.RecvType(xdstype.ClusterURL))
	set("v2", true, clusterNamed(t, "svc2", false))
	if !eventually(func() bool {
		st := rd.r.Status()
		return len(st.HeldBack) > 0 && len(st.Groups) == 1 && st.Groups[0].Resources["Cluster"] == 2
	}) {
		t.Fatalf("svc's v2 not held back, or svc2 not served: %+v", rd.r.Status())
	}
	files, _ := filepath.Glob(filepath.Join(rd.dataDir, "relay-keys", "*.json"))
	if len(files) != 1 {
		t.Fatalf("kept files %v, want one", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(decodedValues(b), "PLANTEDRELAYKEYMARKER") {
		t.Fatalf("the held-back Cluster's inline private key is in the relay's kept file %s", files[0])
	}
	rd.stop()

	rd2 := startRelay(t, []string{lis.Addr().String()}, rd.dataDir, daemon.RelayOptions{Key: "{cluster}"})
	s2 := xdstest.OpenDeltaADS(t, xdstest.Dial(t, rd2.xds), &corev3.Node{Id: "p2", Cluster: "east"})
	s2.Subscribe(xdstype.ClusterURL, "*")
	var names []string
	for _, r := range s2.RecvType(xdstype.ClusterURL).Resources {
		names = append(names, r.Name)
		cl := &clusterv3.Cluster{}
		if err := proto.Unmarshal(r.GetResource().GetValue(), cl); err != nil {
			t.Fatal(err)
		}
		if cl.GetTransportSocket() != nil {
			t.Errorf("after a restart the relay serves %s with the held-back transport socket", r.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"svc", "svc2"}) {
		t.Fatalf("after a restart the relay serves clusters %v, want [svc svc2]: the good version of svc was lost", names)
	}
	// The upstream sends svc's v2 again (the relay resumed with v1): held
	// back again, and the file still keeps v1 for the next restart.
	if !eventually(func() bool { return len(rd2.r.Status().HeldBack) > 0 }) {
		t.Fatal("after a restart svc's v2 was not held back again")
	}
	rd2.stop()
	rd3 := startRelay(t, []string{"127.0.0.1:1"}, rd.dataDir, daemon.RelayOptions{Key: "{cluster}"})
	s3 := xdstest.OpenDeltaADS(t, xdstest.Dial(t, rd3.xds), &corev3.Node{Id: "p3", Cluster: "east"})
	s3.Subscribe(xdstype.ClusterURL, "*")
	if n := len(s3.RecvType(xdstype.ClusterURL).Resources); n != 2 {
		t.Fatalf("after a second restart, with no upstream, the relay serves %d clusters from its data folder, want 2", n)
	}
}

// decodedValues is a kept file with every JSON string that is base64
// decoded beside it (the kept protos are []byte, so base64 in JSON).
func decodedValues(b []byte) string {
	var out strings.Builder
	out.Write(b)
	for _, part := range strings.Split(string(b), `"`) {
		if d, err := base64.StdEncoding.DecodeString(part); err == nil {
			out.Write(d)
		}
	}
	return out.String()
}
