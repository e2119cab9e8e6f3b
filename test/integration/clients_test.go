package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
)

// A real grpc-go client of a group that states no `clients:` is shown as
// grpc-go at its release in /proxies, and the group is named with it in
// /status's clientWarnings and by `pylon status`.
func TestStatusNamesTheGRPCClientsAGroupDoesNotState(t *testing.T) {
	ports := startBackends(t, 1)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, greeterConfig("greeter-backends", ports))
	p := startPylon(t, cfg)
	p.grpcClient(t, "go-client").call(t)

	impl := ""
	if !eventually(func() bool {
		for _, s := range p.proxies(t) {
			if s.Node == "go-client" && s.Gone == nil {
				impl = s.Implementation + " " + s.ImplementationVersion
			}
		}
		return impl == "grpc-go "+grpc.Version
	}) {
		t.Fatalf("go-client shows as %q, want grpc-go %s", impl, grpc.Version)
	}
	want := `group "default" states no clients but proxyless gRPC clients are connected (grpc-go ` + grpc.Version + `)`
	var body struct {
		Clients []string `json:"clientWarnings"`
	}
	if err := json.Unmarshal([]byte(p.get(t, "/status")), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Clients) != 1 || !strings.HasPrefix(body.Clients[0], want) {
		t.Fatalf("clientWarnings %q, want one starting %q", body.Clients, want)
	}
	if out := p.cli(t, "status"); !strings.Contains(out, "1 CLIENT WARNING (proxies connected now):\n  "+want) {
		t.Fatalf("pylon status:\n%s", out)
	}
}

// A group whose `clients:` states the implementation connected is not
// warned about: the group's stated clients reach the status side.
func TestStatusDoesNotWarnOfClientsAGroupStates(t *testing.T) {
	ports := startBackends(t, 1)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, "groups:\n- name: apps\n  default: true\n  clients: [grpc-go]\n"+greeterConfig("greeter-backends", ports))
	p := startPylon(t, cfg)
	p.grpcClient(t, "go-client").call(t)
	if !eventually(func() bool {
		for _, s := range p.proxies(t) {
			if s.Node == "go-client" && s.Gone == nil && s.Implementation == "grpc-go" {
				return true
			}
		}
		return false
	}) {
		t.Fatal("go-client never shown as grpc-go")
	}
	var body struct {
		Clients []string `json:"clientWarnings"`
	}
	if err := json.Unmarshal([]byte(p.get(t, "/status")), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Clients) != 0 {
		t.Fatalf("clientWarnings %q for a group stating clients [grpc-go] with grpc-go connected, want none", body.Clients)
	}
}
