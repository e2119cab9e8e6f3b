package compile

import (
	"slices"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/translate"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const serverGroupsDoc = `groups:
- name: greeter-servers
  match: { cluster: greeter-servers }
  scope: { services: [other] }
- name: greeter-clients
  match: { cluster: greeter-clients }
  clients: [grpc-go]
- name: envoys
  default: true
services:
- name: greeter
  protocol: grpc
  endpoints: [{ address: 127.0.0.1, port: 50051 }]
- name: other
  protocol: grpc
  endpoints: [{ address: 127.0.0.1, port: 50052 }]
grpc:
- target: greeter
  to: [{ service: greeter }]
  server:
    listen: 0.0.0.0:50051
    groups: [greeter-servers]
`

// TestGRPCServerGoesOnlyToItsGroups: a target's server.groups names the
// groups whose nodes serve it; their snapshot holds the server Listener
// (even where their scope names nothing of it) and no other group's does,
// an unscoped Envoy group's included.
func TestGRPCServerGoesOnlyToItsGroups(t *testing.T) {
	f, err := Compile(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(serverGroupsDoc)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := translate.GRPCServerListenerName("0.0.0.0:50051")
	for _, g := range f.Groups() {
		has := slices.Contains(g.Snapshot.Set(xdstype.ListenerURL).Names(), name)
		if want := g.Name == "greeter-servers"; has != want {
			t.Errorf("group %s holds the server Listener: %v; want %v", g.Name, has, want)
		}
		if g.Name == "greeter-clients" && !slices.Contains(g.Snapshot.Set(xdstype.ListenerURL).Names(), "greeter") {
			t.Errorf("group greeter-clients lost the clients' Listener greeter: %v", g.Snapshot.Set(xdstype.ListenerURL).Names())
		}
	}
}

// TestGRPCServerGroupsNameGroupsThatExist: a server.groups entry naming no
// group is a dangling reference, refused with the file, line and field,
// with groups and without.
func TestGRPCServerGroupsNameGroupsThatExist(t *testing.T) {
	for name, doc := range map[string]string{
		"typo":      strings.Replace(serverGroupsDoc, "groups: [greeter-servers]", "groups: [greeter-servres]", 1),
		"no groups": serverGroupsDoc[strings.Index(serverGroupsDoc, "\nservices:")+1:],
	} {
		_, err := Compile(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(doc)}}, nil)
		if err == nil {
			t.Errorf("%s: compiled; want a refusal", name)
			continue
		}
		want := `grpc target "greeter": server.groups[0]: "greeter-serv`
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "g.yaml:") || !strings.Contains(err.Error(), "no group") {
			t.Errorf("%s: the refusal does not say %q (and no group of that name):\n%v", name, want, err)
		}
	}
}
