package xds

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestKeptNodeDropsTheBulk: a stream keeps the node's reported fields, not
// its extensions, metadata or listening addresses (an Envoy's run to
// kilobytes, for as long as the stream lives).
func TestKeptNodeDropsTheBulk(t *testing.T) {
	md, _ := structpb.NewStruct(map[string]any{"mesh": "on", "labels": map[string]any{"app": "x"}})
	node := &corev3.Node{
		Id: "n1", Cluster: "c", Locality: &corev3.Locality{Region: "r", Zone: "z", SubZone: "s"},
		UserAgentName:        "envoy",
		UserAgentVersionType: &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{Version: nil, Metadata: md}},
		Metadata:             md,
		Extensions:           []*corev3.Extension{{Name: "envoy.filters.http.router", Category: "envoy.filters.http"}},
		ClientFeatures:       []string{"envoy.lb.does_not_support_overprovisioning"},
	}
	want := &corev3.Node{
		Id: "n1", Cluster: "c", Locality: &corev3.Locality{Region: "r", Zone: "z", SubZone: "s"},
		UserAgentName:        "envoy",
		UserAgentVersionType: &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{}},
	}
	if got := keptNode(node); !proto.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	node.UserAgentVersionType = &corev3.Node_UserAgentVersion{UserAgentVersion: "1.30"}
	if got := keptNode(node).GetUserAgentVersion(); got != "1.30" {
		t.Errorf("user agent version %q", got)
	}
}
