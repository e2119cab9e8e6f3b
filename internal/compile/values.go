package compile

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
)

var durationType = reflect.TypeFor[nodegroup.Duration]()

// negativeDurations calls fn with the field path (as written in a config)
// of every negative nodegroup.Duration inside v, a model object. A reflective
// walk, so that a duration field added to the model later is covered
// without anyone remembering to.
func negativeDurations(v reflect.Value, path string, fn func(field string)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			negativeDurations(v.Elem(), path, fn)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			negativeDurations(v.Field(i), joinField(path, name), fn)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			negativeDurations(v.Index(i), fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case reflect.Int64:
		if v.Type() == durationType && v.Int() < 0 {
			fn(path)
		}
	}
}

func joinField(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// anyNegative reports whether v holds a negative nodegroup.Duration: the walk
// of negativeDurations without building a path for every field, which
// under churn (every object checked on every publish) was most of it.
// Types that cannot hold a duration (an endpoint, a header match) are
// not walked at all: holds remembers, per type, whether one can.
func anyNegative(v reflect.Value, holds map[reflect.Type]bool) bool {
	if !canHoldDuration(v.Type(), holds) {
		return false
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && anyNegative(v.Elem(), holds)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && anyNegative(v.Field(i), holds) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if anyNegative(v.Index(i), holds) {
				return true
			}
		}
	case reflect.Int64:
		return v.Type() == durationType && v.Int() < 0
	}
	return false
}

// canHoldDuration reports whether a value of type t can hold a
// nodegroup.Duration, memoized in holds. An interface is assumed to.
func canHoldDuration(t reflect.Type, holds map[reflect.Type]bool) bool {
	if h, ok := holds[t]; ok {
		return h
	}
	holds[t] = true // a recursive type: assume so while looking
	h := false
	switch t.Kind() {
	case reflect.Interface:
		h = true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		h = canHoldDuration(t.Elem(), holds)
	case reflect.Struct:
		for i := 0; i < t.NumField() && !h; i++ {
			h = t.Field(i).IsExported() && canHoldDuration(t.Field(i).Type, holds)
		}
	case reflect.Int64:
		h = t == durationType
	}
	holds[t] = h
	return h
}

// durations refuses negative durations in obj, a model object (a
// service, route table or gRPC target); holds is canHoldDuration's memo,
// shared by a compile's objects.
func (c *checker) durations(src model.Source, kind, name string, obj any, holds map[reflect.Type]bool) {
	if !anyNegative(reflect.ValueOf(obj), holds) {
		return
	}
	negativeDurations(reflect.ValueOf(obj), "", func(field string) {
		c.add(src, kind, name, field, "negative duration; Envoy rejects it")
	})
}

// regexes refuses a route's regexes that Envoy or gRPC would reject.
func (c *checker) regexes(rt *model.RouteTable, field string, r *model.Route) {
	if r.Match.Regex != "" {
		if msg := snapshot.RegexProblem(r.Match.Regex); msg != "" {
			c.add(rt.Source, "route table", rt.Name, field+".match.regex", "%s", msg)
		}
	}
	for k, h := range r.Match.Headers {
		if h.Regex == "" {
			continue
		}
		if msg := snapshot.RegexProblem(h.Regex); msg != "" {
			c.add(rt.Source, "route table", rt.Name, fmt.Sprintf("%s.match.headers[%d].regex", field, k), "%s", msg)
		}
	}
}

// duplicates refuses two model objects of one kind with one name, naming
// both places. Without it the second would silently replace the first in
// the checks, and only the translated resources' clash would be reported,
// under Envoy's names rather than the author's.
func (c *checker) duplicates(m *model.Model) {
	type obj struct {
		name string
		src  model.Source
	}
	kinds := []struct {
		kind, field string
		objs        []obj
	}{
		{"service", "name", nil}, {"route table", "name", nil}, {"listener", "name", nil},
		{"secret", "name", nil}, {"grpc target", "target", nil},
	}
	for _, s := range m.Services {
		kinds[0].objs = append(kinds[0].objs, obj{s.Name, s.Source})
	}
	for _, r := range m.Routes {
		kinds[1].objs = append(kinds[1].objs, obj{r.Name, r.Source})
	}
	for _, l := range m.Listeners {
		kinds[2].objs = append(kinds[2].objs, obj{l.Name, l.Source})
	}
	for _, s := range m.Secrets {
		kinds[3].objs = append(kinds[3].objs, obj{s.Name, s.Source})
	}
	for _, g := range m.GRPC {
		kinds[4].objs = append(kinds[4].objs, obj{g.Target, g.Source})
	}
	for _, k := range kinds {
		seen := map[string]model.Source{}
		for _, o := range k.objs {
			if prev, dup := seen[o.name]; dup {
				c.add(o.src, k.kind, o.name, k.field, "duplicate: %s %q is already defined at %s", k.kind, o.name, where(prev))
				continue
			}
			seen[o.name] = o.src
		}
	}
}

func where(src model.Source) string {
	if src.Line > 0 {
		return fmt.Sprintf("%s:%d", src.File, src.Line)
	}
	return src.File
}
