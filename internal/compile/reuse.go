package compile

import (
	"reflect"
	"slices"
	"sync"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/translate"
	"google.golang.org/protobuf/proto"
)

// translations keeps each service's translation (its Cluster and its
// ClusterLoadAssignment) from one compile for the next: under endpoint
// churn one service of a thousand changes per publish, and handing the
// snapshot builder the very messages it encoded last time spares
// translating, encoding and hashing the others (snapshot.Validated keeps
// encodings by message). A service's translation depends on the service
// alone, so an unchanged service (compared as written, its place in the
// files aside) gets the same messages. Safe for concurrent compiles.
type translations struct {
	mu   sync.Mutex
	last map[string]translatedService
}

type translatedService struct {
	svc        model.Service // as written, Source cleared
	cluster    proto.Message
	assignment proto.Message
}

// serviceTranslator translates the services of one compile, reusing the
// previous compile's messages; done hands what it translated to the next.
type serviceTranslator struct {
	t          *translations
	prev, next map[string]translatedService
}

func (t *translations) begin() *serviceTranslator {
	st := &serviceTranslator{t: t}
	if t != nil {
		t.mu.Lock()
		st.prev = t.last
		t.mu.Unlock()
		st.next = make(map[string]translatedService, len(st.prev))
	}
	return st
}

// translate returns s's Cluster and ClusterLoadAssignment.
func (st *serviceTranslator) translate(s *model.Service) (cluster, assignment proto.Message) {
	if st.t == nil {
		return translate.Cluster(s), translate.Endpoints(s)
	}
	key := *s
	key.Source = model.Source{}
	if p, ok := st.prev[s.Name]; ok && sameService(p.svc, key) {
		st.next[s.Name] = p
		return p.cluster, p.assignment
	}
	p := translatedService{svc: key, cluster: translate.Cluster(s), assignment: translate.Endpoints(s)}
	st.next[s.Name] = p
	return p.cluster, p.assignment
}

// sameService reports whether a and b (Source cleared) translate alike.
// The endpoints are compared as values (model.Endpoint is comparable):
// a service's registered endpoints are joined into a new list on every
// compile, which reflect.DeepEqual would walk field by field. The rest
// DeepEqual takes at once where it shares pointers with the previous
// compile, as config.Cache hands out for unchanged text.
func sameService(a, b model.Service) bool {
	if !slices.Equal(a.Endpoints, b.Endpoints) {
		return false
	}
	a.Endpoints, b.Endpoints = nil, nil
	return reflect.DeepEqual(a, b)
}

// done keeps this compile's translations for the next. A translation is
// kept even when the compile is refused: it is the service's whatever the
// rest of the config, and validity is checked again on every compile.
func (st *serviceTranslator) done() {
	if st.t == nil {
		return
	}
	st.t.mu.Lock()
	st.t.last = st.next
	st.t.mu.Unlock()
}
