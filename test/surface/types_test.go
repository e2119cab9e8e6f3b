package surface

import (
	"fmt"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// surface is one type's script: v1 serves changed and kept, v2 changes
// changed, v3 removes it (and what named it).
type surface struct {
	typeURL       string
	names         []string // subscribed; nil: wildcard
	v1, v2, v3    string
	changed, kept string
	value         func(t *testing.T, m proto.Message) string // what v2 changes
	before, after string                                     // value in v1 and v2
	removedInSotW bool                                       // a SotW response after v3 lists only kept
}

func surfaces() map[string]surface {
	return map[string]surface{
		"RTDS": {
			typeURL: xdstype.RuntimeURL, names: []string{"a", "b"},
			v1:      config(runtime("a", 1), runtime("b", 1)),
			v2:      config(runtime("a", 2), runtime("b", 1)),
			v3:      config(runtime("b", 1)),
			changed: "a", kept: "b", before: "1", after: "2",
			value: func(t *testing.T, m proto.Message) string {
				return fmt.Sprint(m.(*runtimev3.Runtime).GetLayer().GetFields()["some.key"].GetNumberValue())
			},
		},
		"ECDS": {
			typeURL: xdstype.ExtensionConfURL, names: []string{"f", "g"},
			v1:      config(extension("f", 1), extension("g", 1), listener("l", 10001, "f", "g")),
			v2:      config(extension("f", 2), extension("g", 1), listener("l", 10001, "f", "g")),
			v3:      config(extension("g", 1), listener("l", 10001, "g")),
			changed: "f", kept: "g", before: "1", after: "2",
			value: func(t *testing.T, m proto.Message) string {
				var fault faultv3.HTTPFault
				if err := m.(*corev3.TypedExtensionConfig).GetTypedConfig().UnmarshalTo(&fault); err != nil {
					t.Fatal(err)
				}
				return fmt.Sprint(fault.GetAbort().GetPercentage().GetNumerator())
			},
		},
		"SRDS": {
			typeURL: xdstype.ScopedRouteURL,
			v1:      config(scope("s1", "a", "r1"), scope("s2", "b", "r2"), route("r1", "one"), route("r2", "two"), listener("l", 10001)),
			v2:      config(scope("s1", "c", "r1"), scope("s2", "b", "r2"), route("r1", "one"), route("r2", "two"), listener("l", 10001)),
			v3:      config(scope("s2", "b", "r2"), route("r2", "two"), listener("l", 10001)),
			changed: "s1", kept: "s2", before: "a", after: "c", removedInSotW: true,
			value: func(t *testing.T, m proto.Message) string {
				return m.(*routev3.ScopedRouteConfiguration).GetKey().GetFragments()[0].GetStringKey()
			},
		},
	}
}

// decode reads resources of typeURL, checking each Any's type and that
// the resource's own name is the one it is listed under; it returns them
// by name.
func decode(t *testing.T, typeURL string, as []*anypb.Any) map[string]proto.Message {
	t.Helper()
	typ := xdstype.New().Lookup(typeURL)
	out := map[string]proto.Message{}
	for _, a := range as {
		if a.GetTypeUrl() != typeURL {
			t.Fatalf("a resource of %s in a response of %s", a.GetTypeUrl(), typeURL)
		}
		m := typ.New()
		if err := a.UnmarshalTo(m); err != nil {
			t.Fatal(err)
		}
		n := xdstype.NameOf(m)
		if _, dup := out[n]; dup {
			t.Fatalf("%s twice in one response (X8)", n)
		}
		out[n] = m
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestServed: each type is served from the config in all four variants
// (X1), with its own type_url, names and versions, updated when the
// config changes and removed when it drops a resource.
func TestServed(t *testing.T) {
	for name, s := range surfaces() {
		for _, v := range []struct {
			name  string
			delta bool
			ads   bool
		}{{"sotw_ads", false, true}, {"sotw_own_service", false, false}, {"delta_ads", true, true}, {"delta_own_service", true, false}} {
			t.Run(name+"/"+v.name, func(t *testing.T) {
				p := start(t, s.v1)
				conn := xdstest.Dial(t, p.xdsAddr)
				typ := xdstype.New().Lookup(s.typeURL)
				if v.delta {
					method := xdstest.DeltaADSMethod
					if !v.ads {
						method = "/" + typ.Service + "/" + typ.DeltaMethod
					}
					servedDelta(t, p, s, xdstest.OpenDelta(t, conn, method, xdstest.Node("n")))
					return
				}
				method := xdstest.ADSMethod
				if !v.ads {
					method = "/" + typ.Service + "/" + typ.SotWMethod
				}
				servedSotW(t, p, s, xdstest.Open(t, conn, method, xdstest.Node("n")), v.ads)
			})
		}
	}
}

func checkSotW(t *testing.T, s surface, resp *discoveryv3.DiscoveryResponse, prevVersion string, want []string) map[string]proto.Message {
	t.Helper()
	if resp.GetVersionInfo() == "" || resp.GetVersionInfo() == prevVersion {
		t.Errorf("version_info %q after %q: want a new one", resp.GetVersionInfo(), prevVersion)
	}
	if resp.GetNonce() == "" || resp.GetControlPlane().GetIdentifier() != identifier {
		t.Errorf("nonce %q, control plane %v", resp.GetNonce(), resp.GetControlPlane())
	}
	got := decode(t, s.typeURL, resp.GetResources())
	if !slices.Equal(sortedKeys(got), want) {
		t.Fatalf("resources %v, want %v", sortedKeys(got), want)
	}
	return got
}

func servedSotW(t *testing.T, p *pylon, s surface, st *xdstest.Stream, ads bool) {
	st.Request(s.typeURL, s.names...)
	resp := st.RecvType(s.typeURL)
	got := checkSotW(t, s, resp, "", []string{s.changed, s.kept})
	if v := s.value(t, got[s.changed]); v != s.before {
		t.Errorf("%s: %s, want %s", s.changed, v, s.before)
	}
	st.ACK(resp, s.names...)

	p.write(t, s.v2)
	prev := resp.GetVersionInfo()
	resp = st.RecvType(s.typeURL)
	want := []string{s.changed}
	if s.removedInSotW {
		// Full state: every response carries the whole set.
		want = []string{s.changed, s.kept}
	}
	got = checkSotW(t, s, resp, prev, want)
	if v := s.value(t, got[s.changed]); v != s.after {
		t.Errorf("%s: %s, want %s", s.changed, v, s.after)
	}
	st.ACK(resp, s.names...)

	// Read before the write: the daemon may publish v3 before a read
	// after it (a file renamed into place is read at once).
	served := p.status(t).Version
	p.write(t, s.v3)
	if s.removedInSotW {
		// Full state: absence is removal (X22).
		prev = resp.GetVersionInfo()
		resp = st.RecvType(s.typeURL)
		checkSotW(t, s, resp, prev, []string{s.kept})
		st.ACK(resp, s.names...)
		return
	}
	// Per resource: a response carries what changed, and a removal of a
	// named resource has nothing to carry (X22). Wait for the publish,
	// then prove nothing of the type was sent.
	waitVersionChange(t, p, served)
	if ads {
		st.ExpectSilence()
	}
}

// waitVersionChange waits until the daemon has published a config other
// than before, the version it served before the change was written.
func waitVersionChange(t *testing.T, p *pylon, before string) {
	t.Helper()
	// The status names the version being served; v3 differs from v2.
	if !eventually(func() bool { return p.status(t).Version != before }) {
		t.Fatal("the change was not published")
	}
}

func servedDelta(t *testing.T, p *pylon, s surface, st *xdstest.DeltaStream) {
	names := s.names
	if names == nil {
		names = []string{"*"}
	}
	st.Subscribe(s.typeURL, names...)
	resp := st.RecvType(s.typeURL)
	got := checkDelta(t, s, resp, []string{s.changed, s.kept}, nil)
	if v := s.value(t, got[s.changed].msg); v != s.before {
		t.Errorf("%s: %s, want %s", s.changed, v, s.before)
	}
	st.ACK(resp)

	p.write(t, s.v2)
	resp = st.RecvType(s.typeURL)
	// Only what changed (X25), with a new version of its own.
	got2 := checkDelta(t, s, resp, []string{s.changed}, nil)
	if v := s.value(t, got2[s.changed].msg); v != s.after {
		t.Errorf("%s: %s, want %s", s.changed, v, s.after)
	}
	if got2[s.changed].version == got[s.changed].version {
		t.Errorf("%s kept version %s through a change", s.changed, got[s.changed].version)
	}
	st.ACK(resp)

	p.write(t, s.v3)
	resp = st.RecvType(s.typeURL)
	checkDelta(t, s, resp, nil, []string{s.changed}) // X34
	st.ACK(resp)
}

type held struct {
	msg     proto.Message
	version string
}

func checkDelta(t *testing.T, s surface, resp *discoveryv3.DeltaDiscoveryResponse, want, removed []string) map[string]held {
	t.Helper()
	if resp.GetNonce() == "" || resp.GetControlPlane().GetIdentifier() != identifier {
		t.Errorf("nonce %q, control plane %v", resp.GetNonce(), resp.GetControlPlane())
	}
	if !slices.Equal(resp.GetRemovedResources(), removed) {
		t.Errorf("removed_resources %v, want %v", resp.GetRemovedResources(), removed)
	}
	out := map[string]held{}
	for _, r := range resp.GetResources() {
		m := decode(t, s.typeURL, []*anypb.Any{r.GetResource()})
		if len(m) != 1 || m[r.GetName()] == nil || r.GetVersion() == "" {
			t.Fatalf("resource %q (version %q) holds %v", r.GetName(), r.GetVersion(), sortedKeys(m))
		}
		out[r.GetName()] = held{m[r.GetName()], r.GetVersion()}
	}
	if !slices.Equal(sortedKeys(out), want) {
		t.Fatalf("resources %v, want %v", sortedKeys(out), want)
	}
	return out
}
