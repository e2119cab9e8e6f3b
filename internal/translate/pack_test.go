package translate_test

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/translate"
)

// A translation holding a map inside a typed_config (a server's RBAC
// policies, by name) encodes alike every time: a resource's version is
// the hash of its encoding, so replicas, restarts and every compile must
// agree on it, or each publish resends what did not change.
func TestTypedConfigWithAMapEncodesAlikeEveryTime(t *testing.T) {
	var policies []model.GRPCPolicy
	for i := range 8 {
		policies = append(policies, model.GRPCPolicy{Name: fmt.Sprintf("p%d", i), Methods: []string{fmt.Sprintf("/svc.S%d/*", i)}})
	}
	g := &model.GRPCTarget{Target: "greeter", Server: &model.GRPCServer{Listen: "0.0.0.0:50051", RBAC: &model.GRPCRBAC{Allow: policies}}}
	det := proto.MarshalOptions{Deterministic: true}
	first, err := det.Marshal(translate.GRPCServerListener(g))
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := det.Marshal(translate.GRPCServerListener(g))
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(first) {
			t.Fatal("the same server Listener encoded two ways: its RBAC policies were packed in map order")
		}
	}
}
