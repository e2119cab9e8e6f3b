package configstore

import (
	"slices"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A service deleted, by a plain delete or by a prune, takes its registered
// endpoints with it, in the same revision (the result lists them): a new
// service of the same name later starts with none, not with the old
// instances' addresses. Other services' registrations stay.
func TestDeletingAServiceDeletesItsRegistrations(t *testing.T) {
	for what, del := range map[string]func(s *Service) (Result, error){
		"delete": func(s *Service) (Result, error) {
			return s.Commit(t.Context(), []store.Change{{Key: store.Key{Kind: "services", Name: "b"}}}, "delete", false)
		},
		"prune": func(s *Service) (Result, error) {
			doc, err := ReadDocument(xdstype.New(), []byte(`{"services":[{"name":"a"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			return s.Prune(t.Context(), doc, "prune", false)
		},
	} {
		t.Run(what, func(t *testing.T) {
			s := New(Options{Store: newBolt(t), Registry: xdstype.New()})
			ctx := t.Context()
			for _, name := range []string{"a", "b"} {
				if _, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: name}, Body: []byte(`{"name":"` + name + `"}`)}}, name, false); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Register(ctx, name, model.Endpoint{Address: "10.0.0.9", Port: 80}, 0); err != nil {
					t.Fatal(err)
				}
			}
			res, err := del(s)
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"- services/b", "- endpoints.b/10.0.0.9:80"}; !slices.Equal(res.Objects, want) {
				t.Errorf("%s of services/b: objects %q, want %q", what, res.Objects, want)
			}
			objs, _, err := s.Store().List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var endpoints []string
			for _, o := range objs {
				if strings.HasPrefix(o.Kind, "endpoints.") {
					endpoints = append(endpoints, o.Kind+"/"+o.Name)
				}
			}
			if want := []string{"endpoints.a/10.0.0.9:80"}; !slices.Equal(endpoints, want) {
				t.Errorf("registrations after the %s: %q, want %q", what, endpoints, want)
			}
		})
	}
}
