package relay

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func inputsOf(reg *xdstype.Registry, msgs ...proto.Message) []xdstype.Resource {
	var out []xdstype.Resource
	for _, m := range msgs {
		url := "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
		out = append(out, xdstype.Resource{Type: reg.Lookup(url), Name: xdstype.NameOf(m), Message: m})
	}
	return out
}

// A route naming a cluster the upstream has not sent is held back, and
// the listener naming that route with it: what is served is whole.
func TestBuildHoldsBackWhatNamesWhatIsMissing(t *testing.T) {
	reg := xdstype.New()
	in := inputsOf(reg, xdstest.APIListener("l", "r"), xdstest.Route("r", "c"), xdstest.Cluster("other"), xdstest.Endpoints("other", 1))
	snap, held, _ := buildKeeping(reg, in, nil, nil)
	if snap == nil {
		t.Fatalf("nothing built: %v", held)
	}
	if snap.Set(xdstype.RouteURL).Len() != 0 || snap.Set(xdstype.ListenerURL).Len() != 0 || snap.Set(xdstype.ClusterURL).Len() != 1 {
		t.Errorf("built %d listeners, %d routes, %d clusters; want the cluster alone", snap.Set(xdstype.ListenerURL).Len(), snap.Set(xdstype.RouteURL).Len(), snap.Set(xdstype.ClusterURL).Len())
	}
	if len(held) < 2 || !strings.Contains(strings.Join(held, "\n"), `RouteConfiguration "r"`) {
		t.Errorf("held back %q, want the route and the listener named", held)
	}
}

// A changed resource that cannot be served keeps its previous good
// version in place rather than leaving the proxies without it.
func TestBuildKeepsThePreviousVersionOfWhatItHoldsBack(t *testing.T) {
	reg := xdstype.New()
	prev, err := snapshot.Build(reg, inputsOf(reg, xdstest.Cluster("c"), xdstest.Endpoints("c", 1)))
	if err != nil {
		t.Fatal(err)
	}
	moved := xdstest.Cluster("c")
	moved.EdsClusterConfig.ServiceName = "c-v2" // its endpoints are not here yet
	moved.ConnectTimeout = durationpb.New(7e9)
	snap, held, _ := buildKeeping(reg, inputsOf(reg, moved, xdstest.Endpoints("c", 1)), prev, nil)
	if snap == nil {
		t.Fatalf("nothing built: %v", held)
	}
	got := snap.Set(xdstype.ClusterURL).Get("c")
	if got == nil || got.Message.(*clusterv3.Cluster).GetConnectTimeout().GetSeconds() != 1 {
		t.Fatalf("cluster c is %v, want its previous version kept", got)
	}
	if len(held) == 0 {
		t.Error("nothing said to be held back")
	}
}
