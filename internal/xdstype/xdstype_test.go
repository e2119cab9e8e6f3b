package xdstype_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	// The discovery services' descriptors, which the registry names.
	_ "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Every entry is consistent with the protos it names: a new type added with
// a typo in its URL, message or gRPC method would otherwise only show up as
// a client that never gets an answer.
func TestRegistryMatchesProtos(t *testing.T) {
	reg := xdstype.New()
	seen := map[string]bool{}
	for _, typ := range reg.Ranked() {
		msg := typ.New().ProtoReflect().Descriptor()
		if want := "type.googleapis.com/" + string(msg.FullName()); typ.URL != want {
			t.Errorf("%s: URL %s, but New makes a %s", typ.Abbrev, typ.URL, want)
		}
		if string(msg.Name()) != typ.Kind {
			t.Errorf("%s: Kind %s, message %s", typ.Abbrev, typ.Kind, msg.Name())
		}
		if reg.Lookup(typ.URL) != typ || reg.ByPlural(typ.Plural) != typ {
			t.Errorf("%s: Lookup or ByPlural does not find it", typ.Abbrev)
		}
		for _, key := range []string{typ.URL, typ.Abbrev, typ.Plural} {
			if seen[key] {
				t.Errorf("%q used by two types", key)
			}
			seen[key] = true
		}
		checkService(t, typ)
	}
	if reg.Lookup("type.googleapis.com/envoy.config.cluster.v3.Nope") != nil || reg.ByPlural("nopes") != nil {
		t.Error("an unknown type is found")
	}
}

// checkService: the type's gRPC service exists with the streaming methods
// named, each taking the discovery request of its variant.
func checkService(t *testing.T, typ *xdstype.Type) {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(typ.Service))
	if err != nil {
		t.Errorf("%s: service %s: %v", typ.Abbrev, typ.Service, err)
		return
	}
	svc := d.(protoreflect.ServiceDescriptor)
	for method, req := range map[string]string{typ.SotWMethod: "DiscoveryRequest", typ.DeltaMethod: "DeltaDiscoveryRequest"} {
		if method == "" {
			continue
		}
		m := svc.Methods().ByName(protoreflect.Name(method))
		if m == nil || !m.IsStreamingClient() || !m.IsStreamingServer() || m.Input().Name() != protoreflect.Name(req) {
			t.Errorf("%s: %s.%s is not a bidirectional stream of %s", typ.Abbrev, typ.Service, method, req)
		}
	}
	if typ.DeltaMethod == "" {
		t.Errorf("%s: every type has a delta method", typ.Abbrev)
	}
}

// The make-before-break order (X37): secrets before what names them,
// clusters, their assignments, extension configs (ECDS) before the
// listeners naming them, listeners, scoped routes (SRDS), then the routes
// they name, virtual hosts. Listener, Cluster and ScopedRouteConfiguration
// are full-state (Envoy drops a scope a state-of-the-world response leaves
// out); only clusters are used without warming (X39).
func TestRegistryOrder(t *testing.T) {
	reg := xdstype.New()
	var order []string
	for _, typ := range reg.Ranked() {
		order = append(order, typ.Abbrev)
		full := typ.URL == xdstype.ListenerURL || typ.URL == xdstype.ClusterURL || typ.URL == xdstype.ScopedRouteURL
		if typ.FullState != full {
			t.Errorf("%s: FullState %v", typ.Abbrev, typ.FullState)
		}
		if typ.MustPrecede != (typ.URL == xdstype.ClusterURL) {
			t.Errorf("%s: MustPrecede %v", typ.Abbrev, typ.MustPrecede)
		}
		if typ.Sensitive != (typ.URL == xdstype.SecretURL) {
			t.Errorf("%s: Sensitive %v", typ.Abbrev, typ.Sensitive)
		}
	}
	want := []string{"RTDS", "SDS", "CDS", "EDS", "ECDS", "LDS", "SRDS", "RDS", "VHDS"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("ranked order (-want +got):\n%s", diff)
	}
}

func TestNameOf(t *testing.T) {
	reg := xdstype.New()
	if n := xdstype.NameOf(&endpointv3.ClusterLoadAssignment{ClusterName: "shop"}); n != "shop" {
		t.Errorf("NameOf(assignment) = %q", n)
	}
	if n := xdstype.NameOf(&listenerv3.Listener{Name: "http"}); n != "http" {
		t.Errorf("NameOf(listener) = %q", n)
	}
	for _, typ := range reg.Ranked() {
		want := "name"
		if typ.URL == xdstype.EndpointURL {
			want = "cluster_name"
		}
		if typ.NameField() != want {
			t.Errorf("%s: NameField %q, want %q", typ.Abbrev, typ.NameField(), want)
		}
		if f := typ.New().ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(typ.NameField())); f == nil || f.Kind() != protoreflect.StringKind {
			t.Errorf("%s: %s has no string field %s", typ.Abbrev, typ.Kind, typ.NameField())
		}
	}
	if !strings.HasSuffix(xdstype.SecretURL, ".Secret") {
		t.Error("SecretURL")
	}
}
