package compile

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// localities is an assignment of one endpoint per locality, each given
// as region/zone@priority.
func localities(spec ...string) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: "shop/web:http"}
	for i, s := range spec {
		loc, prio, _ := strings.Cut(s, "@")
		region, zone, _ := strings.Cut(loc, "/")
		p := uint32(0)
		if prio != "" {
			p = uint32(prio[0] - '0')
		}
		cla.Endpoints = append(cla.Endpoints, &endpointv3.LocalityLbEndpoints{
			Locality: &corev3.Locality{Region: region, Zone: zone}, Priority: p, LoadBalancingWeight: wrapperspb.UInt32(1),
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "10.0.0." + string(rune('1'+i)), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080}}}},
			}}}},
		})
	}
	return cla
}

func TestPreferCloseGivesAZonePinnedGroupItsZoneFirstAndTheRestAsFallback(t *testing.T) {
	for _, c := range []struct {
		name  string
		match nodegroup.Match
		in    *endpointv3.ClusterLoadAssignment
		want  *endpointv3.ClusterLoadAssignment // nil: unchanged
	}{
		{"the zone first", nodegroup.Match{Zone: "a"},
			localities("r1/a", "r1/b", "r2/a", "r1/c"), localities("r1/a@0", "r1/b@1", "r2/a@0", "r1/c@1")},
		{"the region pinned too", nodegroup.Match{Region: "r1", Zone: "a"},
			localities("r1/a", "r1/b", "r2/a"), localities("r1/a@0", "r1/b@1", "r2/a@1")},
		{"priorities kept within each rank", nodegroup.Match{Zone: "a"},
			localities("r1/a", "r1/a@1", "r1/b", "r1/b@1"), localities("r1/a@0", "r1/a@1", "r1/b@2", "r1/b@3")},
		{"no endpoint in the zone", nodegroup.Match{Zone: "x"}, localities("r1/a", "r1/b"), nil},
		{"every endpoint in the zone", nodegroup.Match{Zone: "a"}, localities("r1/a", "r2/a"), nil},
	} {
		before := proto.Clone(c.in)
		got := closeFirst(c.in, locality{region: c.match.Region, zone: c.match.Zone})
		if d := cmp.Diff(before, c.in, protocmp.Transform()); d != "" {
			t.Errorf("%s: the assignment given, shared by other groups, was changed (-before +after):\n%s", c.name, d)
		}
		if c.want == nil {
			if got != nil {
				t.Errorf("%s: rewritten to %v; want it unchanged", c.name, got)
			}
			continue
		}
		if d := cmp.Diff(c.want, got, protocmp.Transform()); d != "" {
			t.Errorf("%s: (-want +got):\n%s", c.name, d)
		}
	}
}

const preferCloseDoc = `groups:
- name: zone-a
  match: { zone: a }
- name: east-a
  match: { region: east, zone: a }
- name: east
  match: { region: east }
- name: rest
  default: true
services:
- name: web
  traffic_distribution: PreferClose
  endpoints:
  - { address: 10.0.0.1, port: 8080, region: east, zone: a }
  - { address: 10.0.0.2, port: 8080, region: east, zone: b }
  - { address: 10.0.0.3, port: 8080, region: west, zone: a }
- name: plain
  endpoints:
  - { address: 10.0.1.1, port: 8080, zone: a }
  - { address: 10.0.1.2, port: 8080, zone: b }
`

// priorities are an assignment's endpoints' priorities, by address.
func priorities(cla *endpointv3.ClusterLoadAssignment) map[string]uint32 {
	out := map[string]uint32{}
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			out[e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()] = l.GetPriority()
		}
	}
	return out
}

func TestPreferCloseServicesAreServedCloseFirstToTheGroupsThatPinAZone(t *testing.T) {
	f, err := Compile(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(preferCloseDoc)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]uint32{
		"zone-a": {"10.0.0.1": 0, "10.0.0.2": 1, "10.0.0.3": 0},
		"east-a": {"10.0.0.1": 0, "10.0.0.2": 1, "10.0.0.3": 1},
		// Not pinned to a zone: every endpoint at priority 0.
		"east": {"10.0.0.1": 0, "10.0.0.2": 0, "10.0.0.3": 0},
		"rest": {"10.0.0.1": 0, "10.0.0.2": 0, "10.0.0.3": 0},
	}
	for _, g := range f.Groups() {
		cla, _ := g.Snapshot.Set(xdstype.EndpointURL).Get("web").Message.(*endpointv3.ClusterLoadAssignment)
		if d := cmp.Diff(want[g.Name], priorities(cla)); d != "" {
			t.Errorf("group %s: web's priorities (-want +got):\n%s", g.Name, d)
		}
		plain, _ := g.Snapshot.Set(xdstype.EndpointURL).Get("plain").Message.(*endpointv3.ClusterLoadAssignment)
		if d := cmp.Diff(map[string]uint32{"10.0.1.1": 0, "10.0.1.2": 0}, priorities(plain)); d != "" {
			t.Errorf("group %s: plain, of no traffic_distribution, (-want +got):\n%s", g.Name, d)
		}
	}
}

func TestATrafficDistributionPylonDoesNotServeIsRefusedNamingTheServiceAndField(t *testing.T) {
	for value, says := range map[string]string{
		"PreferSameNode": "cannot tell a proxy's node",
		"Nearest":        "not one of",
	} {
		doc := strings.Replace(preferCloseDoc, "traffic_distribution: PreferClose", "traffic_distribution: "+value, 1)
		_, err := Compile(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(doc)}}, nil)
		if err == nil || !strings.Contains(err.Error(), "g.yaml:") || !strings.Contains(err.Error(), `service "web": traffic_distribution`) || !strings.Contains(err.Error(), says) {
			t.Errorf("traffic_distribution %s: err %v; want a refusal naming g.yaml, service web's traffic_distribution and saying %q", value, err, says)
		}
	}
	doc := strings.Replace(preferCloseDoc, "traffic_distribution: PreferClose", "traffic_distribution: PreferSameZone", 1)
	if _, err := Compile(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(doc)}}, nil); err != nil {
		t.Errorf("PreferSameZone, PreferClose's new name: %v", err)
	}
}

// Through a Cache, a change to one PreferClose service gives the groups
// its new assignment close first, while another service's close-first
// assignment is the very message of the compile before: kept, not
// rewritten and validated again for every zone's group on every change.
func TestPreferCloseRewritesOnlyTheChangedServicesThroughACache(t *testing.T) {
	reg := xdstype.New()
	var c Cache
	assignment := func(f *fleet.Fleet, group, name string) *endpointv3.ClusterLoadAssignment {
		g, _ := f.Lookup(group)
		cla, _ := g.Snapshot.Set(xdstype.EndpointURL).Get(name).Message.(*endpointv3.ClusterLoadAssignment)
		return cla
	}
	before, err := c.Compile(reg, []config.File{preferCloseWorld(3, true, 0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, err := c.Compile(reg, []config.File{preferCloseWorld(3, true, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"zone-a", "zone-b", "zone-c"} {
		if a, b := assignment(before, g, "svc-1"), assignment(after, g, "svc-1"); a == nil || a != b {
			t.Errorf("group %s: svc-1, unchanged, is another message after the change (%p, then %p)", g, a, b)
		}
		changed := assignment(after, g, "svc-0")
		var port uint32
		near := map[string]uint32{}
		for _, l := range changed.GetEndpoints() {
			near[l.GetLocality().GetZone()] = l.GetPriority()
			for _, e := range l.GetLbEndpoints() {
				if e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress() == "10.0.0.0" {
					port = e.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
				}
			}
		}
		zone := strings.TrimPrefix(g, "zone-")
		if port != 9001 || near[zone] != 0 || len(near) != 3 {
			t.Errorf("group %s: svc-0 after the change has 10.0.0.0's port %d (want 9001) and priorities by zone %v (want %s at 0)", g, port, near, zone)
		}
		for z, p := range near {
			if z != zone && p != 1 {
				t.Errorf("group %s: svc-0's zone %s at priority %d, want 1", g, z, p)
			}
		}
	}
}

// A group that pins no zone but receives PreferClose services is warned
// of, naming its file, line and match.zone: its nodes get no endpoint
// first. The default group (nodes of any zone) and zone-pinned groups
// are not.
func TestAGroupPinningNoZoneIsWarnedItsPreferCloseServicesOrderNothing(t *testing.T) {
	_, warnings, err := CompileWithWarnings(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(preferCloseDoc)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range warnings {
		got = append(got, w.String())
	}
	want := []string{`g.yaml:7: group "east": match.zone: pins no zone, so the traffic_distribution of the 1 service(s) it receives (web) orders nothing: its nodes get every zone's endpoints at priority 0; pin match.zone (a group per zone) to serve them close first`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
}

// A group pinning a zone none of its PreferClose services has an
// endpoint in (a typo) is warned of too: it orders nothing either.
func TestAGroupPinningAZoneOfNoEndpointIsWarned(t *testing.T) {
	doc := strings.Replace(preferCloseDoc, "- name: rest\n", "- name: typo\n  match: { zone: aa }\n- name: rest\n", 1)
	_, warnings, err := CompileWithWarnings(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(doc)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range warnings {
		if w.Name == "typo" {
			got = append(got, w.String())
		}
	}
	want := []string{`g.yaml:9: group "typo": match.zone: none of the 1 PreferClose service(s) it receives (web) has an endpoint in zone "aa": its nodes get every endpoint at priority 0; check the zone's name (an endpoint's region from --kube-cluster is the cluster's name)`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("warnings of group typo (-want +got):\n%s", d)
	}
}
