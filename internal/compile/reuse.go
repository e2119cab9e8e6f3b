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
// ClusterLoadAssignment), each route table's and each listener's from one
// compile for the next: under endpoint churn one service of a thousand
// changes per publish, and handing the snapshot builder the very messages
// it encoded last time spares translating, encoding and hashing the
// others (snapshot.Validated keeps encodings by message). A service's and
// a route table's translation depend on the object alone, so an unchanged
// one (compared as written, its place in the files aside) gets the same
// messages; a listener's depends also on whether the route tables it
// names are rate limited, which is compared too. Safe for concurrent
// compiles.
type translations struct {
	mu   sync.Mutex
	last translated
}

// translated is one compile's translations, by name. An entry is not
// changed once in a map: the next compile takes it as it is or makes
// another, and compiles through one Cache may run at once. (By pointer:
// a map holds a value this large apart from itself, allocated at every
// insertion, which for a thousand services was a third of a change's
// allocations.)
type translated struct {
	services  map[string]*translatedService
	tables    map[string]*translatedTable
	listeners map[string]*translatedListener
}

type translatedService struct {
	svc        model.Service // as written, Source cleared
	cluster    proto.Message
	assignment proto.Message
	checked    checkedAs
}

type translatedTable struct {
	table       model.RouteTable // as written, Source cleared
	rateLimited bool
	config      proto.Message
	checked     checkedAs
}

type translatedListener struct {
	listener model.Listener // as written, Source cleared
	// asked is what the translation asked of rateLimited, in order.
	asked   []askedTable
	message proto.Message
	checked checkedAs
}

// askedTable is one answer of rateLimited a listener's translation used.
type askedTable struct {
	table       string
	rateLimited bool
}

// serviceTranslator translates the services, route tables and listeners
// of one compile, reusing the previous compile's messages; done hands
// what it translated to the next.
type serviceTranslator struct {
	t          *translations
	prev, next translated
}

func (t *translations) begin() *serviceTranslator {
	st := &serviceTranslator{t: t}
	if t != nil {
		t.mu.Lock()
		st.prev = t.last
		t.mu.Unlock()
		st.next = translated{
			services:  make(map[string]*translatedService, len(st.prev.services)),
			tables:    make(map[string]*translatedTable, len(st.prev.tables)),
			listeners: make(map[string]*translatedListener, len(st.prev.listeners)),
		}
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
	if p, ok := st.prev.services[s.Name]; ok && sameService(p.svc, key) {
		st.next.services[s.Name] = p
		return p.cluster, p.assignment
	}
	p := &translatedService{svc: key, cluster: translate.Cluster(s), assignment: translate.Endpoints(s)}
	st.next.services[s.Name] = p
	return p.cluster, p.assignment
}

// routes returns rt's RouteConfiguration and whether it rate limits
// (translate.UsesRateLimit).
func (st *serviceTranslator) routes(rt *model.RouteTable) (proto.Message, bool) {
	if st.t == nil {
		return translate.RouteConfiguration(rt), translate.UsesRateLimit(rt)
	}
	key := *rt
	key.Source = model.Source{}
	if p, ok := st.prev.tables[rt.Name]; ok && reflect.DeepEqual(p.table, key) {
		st.next.tables[rt.Name] = p
		return p.config, p.rateLimited
	}
	p := &translatedTable{table: key, rateLimited: translate.UsesRateLimit(rt), config: translate.RouteConfiguration(rt)}
	st.next.tables[rt.Name] = p
	return p.config, p.rateLimited
}

// listener returns l's Listener, its HTTP filters as rateLimited says.
func (st *serviceTranslator) listener(l *model.Listener, rateLimited func(table string) bool) proto.Message {
	if st.t == nil {
		return translate.Listener(l, rateLimited)
	}
	key := *l
	key.Source = model.Source{}
	if p, ok := st.prev.listeners[l.Name]; ok && reflect.DeepEqual(p.listener, key) && sameAnswers(p.asked, rateLimited) {
		st.next.listeners[l.Name] = p
		return p.message
	}
	p := &translatedListener{listener: key}
	p.message = translate.Listener(l, func(table string) bool {
		limited := rateLimited(table)
		p.asked = append(p.asked, askedTable{table, limited})
		return limited
	})
	st.next.listeners[l.Name] = p
	return p.message
}

// sameAnswers reports whether rateLimited answers as it did for asked.
func sameAnswers(asked []askedTable, rateLimited func(table string) bool) bool {
	for _, a := range asked {
		if rateLimited(a.table) != a.rateLimited {
			return false
		}
	}
	return true
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
// kept even when the compile is refused: it is the object's whatever the
// rest of the config, and validity is checked again on every compile.
func (st *serviceTranslator) done() {
	if st.t == nil {
		return
	}
	st.t.mu.Lock()
	st.t.last = st.next
	st.t.mu.Unlock()
}
