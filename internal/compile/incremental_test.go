package compile

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// editableWorld is a small config the property test edits at random:
// services, route tables and listeners, each object's text kept apart so
// that an edit rewrites one of them; rendered as a few files, JSON or
// YAML.
type editableWorld struct {
	services  map[int]string // by index: the service's JSON
	tables    map[int]string
	listeners map[int]string
	yaml      bool // the listeners' file is YAML (not cached item by item)
}

func newEditableWorld() *editableWorld {
	w := &editableWorld{services: map[int]string{}, tables: map[int]string{}, listeners: map[int]string{}}
	for i := range 12 {
		w.services[i] = serviceText(i, 8080, "")
	}
	for t := range 3 {
		w.tables[t] = tableText(t, []int{t, t + 3, t + 6}, false, "")
		w.listeners[t] = listenerText(t, 10000+t, t)
	}
	return w
}

func serviceText(i, port int, lb string) string {
	extra := ""
	if lb != "" {
		extra = fmt.Sprintf(`, "lb": %q`, lb)
	}
	return fmt.Sprintf(`{"name": "svc-%d", "endpoints": [{"address": "10.0.%d.1", "port": %d}, {"address": "10.0.%d.2", "port": 8080}]%s}`, i, i, port, i, extra)
}

func tableText(t int, targets []int, limited bool, suffix string) string {
	var routes []string
	for k, s := range targets {
		limit := ""
		if limited && k == 0 {
			limit = `, "rate_limit": {"requests": 10}`
		}
		routes = append(routes, fmt.Sprintf(`{"match": {"prefix": "/svc-%d%s/"}, "to": [{"service": "svc-%d"}]%s}`, s, suffix, s, limit))
	}
	return fmt.Sprintf(`{"name": "r%d", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [%s]}]}`, t, strings.Join(routes, ", "))
}

func listenerText(l, port, table int) string {
	return fmt.Sprintf(`{"name": "l%d", "port": %d, "routes": "r%d"}`, l, port, table)
}

// files renders the world: services split over two files, the route
// tables in one, the listeners in one (JSON or YAML: JSON is a subset).
func (w *editableWorld) files() []config.File {
	list := func(key string, m map[int]string, keep func(int) bool) string {
		var items []string
		for _, k := range slices.Sorted(mapKeys(m)) {
			if keep(k) {
				items = append(items, m[k])
			}
		}
		return fmt.Sprintf(`{%q: [%s]}`, key, strings.Join(items, ",\n"))
	}
	listeners := list("listeners", w.listeners, func(int) bool { return true })
	if w.yaml {
		listeners = "# YAML\n" + listeners
	}
	return []config.File{
		{Path: "a/services.json", Data: []byte(list("services", w.services, func(i int) bool { return i%2 == 0 }))},
		{Path: "b/services.json", Data: []byte(list("services", w.services, func(i int) bool { return i%2 == 1 }))},
		{Path: "routes.json", Data: []byte(list("routes", w.tables, func(int) bool { return true }))},
		{Path: "listeners.yaml", Data: []byte(listeners)},
	}
}

func mapKeys(m map[int]string) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// edit makes one random change: most keep the config valid, some break
// it (a route to a service that is gone, two listeners on one port, a
// bad port) and a later edit mends it or not.
func (w *editableWorld) edit(r *rand.Rand) string {
	svc, table, lis := r.IntN(14), r.IntN(4), r.IntN(4)
	switch r.IntN(11) {
	case 0:
		w.services[svc] = serviceText(svc, 8000+r.IntN(5), "")
		return fmt.Sprintf("service %d's port", svc)
	case 1:
		w.services[svc] = serviceText(svc, 8080, []string{"", "round_robin", "least_request", "bogus"}[r.IntN(4)])
		return fmt.Sprintf("service %d's lb", svc)
	case 2:
		delete(w.services, svc)
		return fmt.Sprintf("service %d removed", svc)
	case 3:
		targets := []int{r.IntN(14), r.IntN(14)}
		w.tables[table] = tableText(table, targets, r.IntN(3) == 0, "")
		return fmt.Sprintf("table %d's targets %v", table, targets)
	case 4:
		w.tables[table] = tableText(table, []int{table, table + 3}, true, fmt.Sprintf("-v%d", r.IntN(3)))
		return fmt.Sprintf("table %d rate limited", table)
	case 5:
		w.tables[table] = tableText(table, []int{table, table + 3}, false, "")
		return fmt.Sprintf("table %d not rate limited", table)
	case 6:
		delete(w.tables, table)
		return fmt.Sprintf("table %d removed", table)
	case 7:
		w.listeners[lis] = listenerText(lis, 10000+r.IntN(5), r.IntN(4))
		return fmt.Sprintf("listener %d's port and table", lis)
	case 8:
		delete(w.listeners, lis)
		return fmt.Sprintf("listener %d removed", lis)
	case 9:
		w.yaml = !w.yaml
		return "the listeners' file's format"
	default:
		w.services[svc] = serviceText(svc, 70000, "")
		return fmt.Sprintf("service %d's bad port", svc)
	}
}

// TestIncrementalCompileEqualsFullCompile edits a config at random, a few
// hundred times over seeded runs, and compiles each version twice: through
// a Cache kept across the edits (decoded items, translations, encodings,
// built resources and validations reused) and from nothing. The two must
// agree on everything: the refusal's text, or the fleet's version, each
// group's resources (name, version, encoding, message, references).
func TestIncrementalCompileEqualsFullCompile(t *testing.T) {
	reg := xdstype.New()
	for seed := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, 36))
		w := newEditableWorld()
		var c Cache
		for step := range 80 {
			what := "the start"
			if step > 0 {
				what = w.edit(r)
			}
			files := w.files()
			inc, incWarn, incErr := c.CompileWithWarnings(reg, files, nil)
			full, fullWarn, fullErr := CompileWithWarnings(reg, files, nil)
			at := fmt.Sprintf("seed %d, step %d (%s)", seed, step, what)
			if (incErr == nil) != (fullErr == nil) || (incErr != nil && incErr.Error() != fullErr.Error()) {
				t.Fatalf("%s: the incremental compile's error is %v, the full compile's %v", at, incErr, fullErr)
			}
			if incErr != nil {
				continue
			}
			if d := cmp.Diff(fullWarn, incWarn); d != "" {
				t.Fatalf("%s: warnings differ (-full +incremental):\n%s", at, d)
			}
			sameFleet(t, at, full, inc)
		}
	}
}

// sameFleet fails t unless a and b serve the same resources.
func sameFleet(t *testing.T, at string, full, inc *fleet.Fleet) {
	t.Helper()
	if full.Version() != inc.Version() {
		t.Fatalf("%s: the fleet's version is %s incrementally, %s in full", at, inc.Version(), full.Version())
	}
	fg, ig := full.Groups(), inc.Groups()
	if len(fg) != len(ig) {
		t.Fatalf("%s: %d groups incrementally, %d in full", at, len(ig), len(fg))
	}
	for i := range fg {
		for _, fs := range fg[i].Snapshot.Sets() {
			is := ig[i].Snapshot.Set(fs.Type().URL)
			if !slices.Equal(fs.Names(), is.Names()) || fs.Version() != is.Version() {
				t.Fatalf("%s: %s: names %v version %s incrementally, %v %s in full", at, fs.Type().Kind, is.Names(), is.Version(), fs.Names(), fs.Version())
			}
			for _, n := range fs.Names() {
				fr, ir := fs.Get(n), is.Get(n)
				if d := cmp.Diff(fr, ir, protocmp.Transform(), cmp.AllowUnexported(*fr)); d != "" {
					t.Fatalf("%s: %s %s differs (-full +incremental):\n%s", at, fs.Type().Kind, n, d)
				}
			}
		}
	}
}
