package config

import (
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestEndpointsJoinTheirService: the top-level endpoints list joins
// services defined in other files, after their own endpoints; an endpoint
// naming no service, or with a field the schema lacks, is refused naming
// the file, line and field.
func TestEndpointsJoinTheirService(t *testing.T) {
	reg := xdstype.New()
	doc, err := Load(reg, []File{
		{Path: "svc.yaml", Data: []byte("services:\n- name: web\n  endpoints: [{address: 10.0.0.1, port: 80}]\n")},
		{Path: "eps.json", Data: []byte(`{"endpoints": [{"service": "web", "address": "10.0.0.2", "port": 81, "zone": "b"}]}`)},
		{Path: "more.yaml", Data: []byte("endpoints:\n- {service: web, address: 10.0.0.3, port: 82}\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := doc.JoinEndpoints(); p != nil {
		t.Fatal(p)
	}
	got := doc.Services[0].Endpoints
	want := []model.Endpoint{{Address: "10.0.0.1", Port: 80}, {Address: "10.0.0.2", Port: 81, Zone: "b"}, {Address: "10.0.0.3", Port: 82}}
	if len(got) != len(want) {
		t.Fatalf("web's endpoints %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("endpoint %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	doc, err = Load(reg, []File{{Path: "eps.yaml", Data: []byte("endpoints:\n- {service: nope, address: 10.0.0.2, port: 81}\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if p := doc.JoinEndpoints(); p == nil || !strings.Contains(p.Error(), `eps.yaml:2: endpoint "nope": service: no service "nope" is defined`) {
		t.Errorf("an endpoint of no service: %v", p)
	}
	for _, c := range []struct{ data, want string }{
		{"endpoints:\n- {service: web, address: 10.0.0.2, port: 81, colour: red}\n", "eps.yaml:2: endpoint"},
		{"endpoints:\n- {address: 10.0.0.2, port: 81}\n", "service: missing"},
	} {
		if _, err := Load(reg, []File{{Path: "eps.yaml", Data: []byte(c.data)}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.data, err, c.want)
		}
	}
}

// TestJoinedEndpointsLeaveTheCacheAlone: joining copies the service's list;
// appending in place would write into the spare capacity of a list the
// cache shares, and an earlier load's service would change under it.
func TestJoinedEndpointsLeaveTheCacheAlone(t *testing.T) {
	reg := xdstype.New()
	var c Cache
	// Three endpoints: a list that grew to three has room for a fourth.
	svc := File{Path: "services/web", Data: []byte(`{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.1", "port": 80}, {"address": "10.0.1.1", "port": 80}, {"address": "10.0.2.1", "port": 80}]}]}`)}
	load := func(addr string) *Document {
		t.Helper()
		doc, err := c.Load(reg, []File{svc, {Path: "endpoints/web", Data: []byte(`{"endpoints": [{"service": "web", "address": "` + addr + `", "port": 80}]}`)}})
		if err != nil {
			t.Fatal(err)
		}
		if p := doc.JoinEndpoints(); p != nil {
			t.Fatal(p)
		}
		return doc
	}
	first := load("10.0.0.2")
	load("10.0.0.3")
	if got := first.Services[0].Endpoints; len(got) != 4 || got[3].Address != "10.0.0.2" {
		t.Errorf("the first load's endpoints changed under it: %+v", got)
	}
}

// BenchmarkJoinEndpoints: a hot service with 20,000 registered endpoints
// (each registration adds one); joining is linear in them.
func BenchmarkJoinEndpoints(b *testing.B) {
	base := Document{}
	base.Services = []model.Service{{Name: "web"}}
	for i := range 20000 {
		base.Endpoints = append(base.Endpoints, Endpoint{Service: "web", Endpoint: model.Endpoint{Address: "10.0.0.1", Port: uint32(1 + i)}})
	}
	b.ReportAllocs()
	for b.Loop() {
		d := base
		d.Services = []model.Service{{Name: "web"}}
		if p := d.JoinEndpoints(); p != nil {
			b.Fatal(p)
		}
	}
}
