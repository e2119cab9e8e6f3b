package snapshot

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A Validated that keeps keys only remembers which resources passed, not
// their encodings nor the Resources built of them: a check whose result
// is thrown away holds a few bytes a resource between builds, not the
// fleet.
func TestValidatedKeysOnlyKeepsNoEncodings(t *testing.T) {
	reg := xdstype.New()
	in := []xdstype.Resource{{Type: reg.Lookup(xdstype.ClusterURL), Name: "a", Message: &clusterv3.Cluster{Name: "a", ConnectTimeout: durationpb.New(1e9)}}}
	v := &Validated{KeysOnly: true}
	if _, err := BuildValidated(reg, in, v); err != nil {
		t.Fatal(err)
	}
	if len(v.encs) > 0 || len(v.prev) != 1 {
		t.Errorf("after a build it keeps %d encodings and %d keys, want none and one", len(v.encs), len(v.prev))
	}
}
