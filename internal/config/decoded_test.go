package config

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A file that carries its endpoints decoded (File.Endpoints) loads as its
// text does: the same endpoints with the same file and lines, beside the
// other files, through a cache or not; and an endpoint the text would be
// refused for is refused with the text's diagnostics.
func TestDecodedEndpointsLoadAsTheirText(t *testing.T) {
	reg := xdstype.New()
	svc := File{Path: "services/web", Data: []byte(`{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.1", "port": 80}]}]}`)}
	eps := File{Path: "endpoints/web", Data: []byte(`{"endpoints": [{"service":"web","address":"10.0.0.2","port":81},
{"service":"web","address":"::1","port":82,"weight":3,"region":"r","zone":"z","sub_zone":"s","priority":1,"health":"draining"},
{"service":"web","address":"a\u003cb.example","port":83}]}`), Endpoints: []Endpoint{
		{Service: "web", Endpoint: model.Endpoint{Address: "10.0.0.2", Port: 81}},
		{Service: "web", Endpoint: model.Endpoint{Address: "::1", Port: 82, Weight: 3, Region: "r", Zone: "z", SubZone: "s", Priority: 1, Health: "draining"}},
		{Service: "web", Endpoint: model.Endpoint{Address: "a<b.example", Port: 83}},
	}}
	text := eps
	text.Endpoints = nil
	// Placed: File and Line set as loading would; misplaced: set wrong,
	// which loading corrects.
	placed, misplaced := eps, eps
	placed.Endpoints, misplaced.Endpoints = slices.Clone(eps.Endpoints), slices.Clone(eps.Endpoints)
	for i := range placed.Endpoints {
		placed.Endpoints[i].File, placed.Endpoints[i].Line = eps.Path, i+1
		misplaced.Endpoints[i].File, misplaced.Endpoints[i].Line = eps.Path, i
	}
	for _, c := range []*Cache{nil, {}} {
		for _, f := range []File{eps, placed, misplaced} {
			want, err := Load(reg, []File{svc, text, text})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Load(reg, []File{svc, f, f})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), ignoreIdentities); diff != "" {
				t.Fatalf("decoded endpoints load otherwise than their text (-text +decoded):\n%s", diff)
			}
		}
	}
	if placed.Endpoints[0].Line != 1 || misplaced.Endpoints[0].Line != 0 || eps.Endpoints[0].Line != 0 {
		t.Fatal("loading modified the decoded endpoints it was given")
	}
	// Taken as they are, the decoded endpoints are never appended to in
	// place: two loads that share them keep their own endpoints after.
	placed.Endpoints = append(make([]Endpoint, 0, 2*len(placed.Endpoints)), placed.Endpoints...)
	other := func(addr string) File {
		return File{Path: "endpoints/" + addr, Data: []byte(`{"endpoints": [{"service":"web","address":"` + addr + `","port":80}]}`)}
	}
	first, err := Load(reg, []File{svc, placed, other("10.9.9.1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(reg, []File{svc, placed, other("10.9.9.2")}); err != nil {
		t.Fatal(err)
	}
	if got := first.Endpoints[len(first.Endpoints)-1].Address; got != "10.9.9.1" {
		t.Fatalf("a later load changed an earlier one's endpoints: its last is %s, want 10.9.9.1", got)
	}

	bad := File{Path: "endpoints/x", Data: []byte(`{"endpoints": [{"service":"","address":"10.0.0.2","port":81}]}`), Endpoints: []Endpoint{{Endpoint: model.Endpoint{Address: "10.0.0.2", Port: 81}}}}
	_, got := Load(reg, []File{svc, bad})
	bad.Endpoints = nil
	_, want := Load(reg, []File{svc, bad})
	if want == nil || got == nil || got.Error() != want.Error() {
		t.Fatalf("an endpoint without a service: %v, want the text's %v", got, want)
	}
}
