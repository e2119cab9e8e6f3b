package compile

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Shape of the sharded world: groups of services each, every service
// with endpoints of its own.
const (
	shardGroups    = 10
	shardServices  = 100
	shardEndpoints = 10
)

// shardFleetFiles is a fleet of 10 node groups, each scoped to its own
// listener, whose route table routes to 100 services of its own (1,000
// services of ten endpoints in all), one file per object as the store
// renders them; the endpoint of service moved is on port.
func shardFleetFiles(moved, port int) []config.File {
	var files []config.File
	var groups []string
	for g := range shardGroups {
		var routes []string
		for s := range shardServices {
			i := g*shardServices + s
			var eps []string
			for j := range shardEndpoints {
				p := 8080
				if i == moved && j == 0 {
					p = port
				}
				eps = append(eps, fmt.Sprintf(`{"address": "10.%d.%d.%d", "port": %d}`, i/256, i%256, j, p))
			}
			files = append(files, config.File{Path: fmt.Sprintf("services/svc-%d", i), Data: []byte(fmt.Sprintf(`{"services": [{"name": "svc-%d", "endpoints": [%s]}]}`, i, strings.Join(eps, ", ")))})
			routes = append(routes, fmt.Sprintf(`{"match": {"prefix": "/svc-%d/"}, "to": [{"service": "svc-%d"}]}`, i, i))
		}
		files = append(files,
			config.File{Path: fmt.Sprintf("routes/r-%d", g), Data: []byte(fmt.Sprintf(`{"routes": [{"name": "r-%d", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [%s]}]}]}`, g, strings.Join(routes, ", ")))},
			config.File{Path: fmt.Sprintf("listeners/l-%d", g), Data: []byte(fmt.Sprintf(`{"listeners": [{"name": "l-%d", "port": 8080, "routes": "r-%d"}]}`, g, g))},
		)
		groups = append(groups, fmt.Sprintf(`{"name": "g-%d", "match": {"id": "g-%d-*"}, "scope": {"listeners": ["l-%d"]}}`, g, g, g))
	}
	return append(files, config.File{Path: "groups/groups", Data: []byte(`{"groups": [` + strings.Join(groups, ", ") + `]}`)})
}

// BenchmarkShardCompile compiles the sharded world as a replica serving
// every group and as a shard serving one of the ten (--groups g-0):
// "first" is a compile through a new Cache (a replica's start), reporting
// too the heap the compiled fleet and its Cache keep (retained-B, what a
// replica holds between publishes) and, of that, the decoded config
// (decoded-B); "change" is a publish under churn, one endpoint of the
// shard's group moved. Past decoding the files, which every replica does
// for the whole config, the shard's cost is about a tenth of the whole's.
// "write-check" is a shard checking a write whole (Cache.Whole: another
// group's endpoint moved), and what its caches keep without and with the
// check's.
func BenchmarkShardCompile(b *testing.B) {
	reg := xdstype.New()
	for _, c := range []struct {
		name  string
		serve fleet.Selector
	}{{"all", nil}, {"one-group", fleet.Selector{"g-0"}}} {
		b.Run(c.name+"/first", func(b *testing.B) {
			files := shardFleetFiles(-1, 0)
			b.ReportAllocs()
			for b.Loop() {
				cache := &Cache{Groups: c.serve}
				if _, err := cache.Compile(reg, files, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(retainedBy(b, func() any {
				cache := &Cache{Groups: c.serve}
				f, err := cache.Compile(reg, files, nil)
				if err != nil {
					b.Fatal(err)
				}
				return []any{cache, f}
			})), "retained-B")
			// Of which the decoded config, whole on every replica.
			b.ReportMetric(float64(retainedBy(b, func() any {
				var load config.Cache
				if _, err := load.Load(reg, files); err != nil {
					b.Fatal(err)
				}
				return &load
			})), "decoded-B")
		})
		b.Run(c.name+"/change", func(b *testing.B) {
			cache := &Cache{Groups: c.serve}
			if _, err := cache.Compile(reg, shardFleetFiles(-1, 0), nil); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				files := shardFleetFiles(i%shardServices, 9000+i%1000)
				b.StartTimer()
				if _, err := cache.Compile(reg, files, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("one-group/write-check", func(b *testing.B) {
		shard := &Cache{Groups: fleet.Selector{"g-0"}}
		if _, err := shard.Compile(reg, shardFleetFiles(-1, 0), nil); err != nil {
			b.Fatal(err)
		}
		check := shard.Whole()
		if _, err := check.Compile(reg, shardFleetFiles(-1, 0), nil); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			b.StopTimer()
			i++
			files := shardFleetFiles(shardServices+i%shardServices, 9000+i%1000)
			b.StartTimer()
			if _, err := check.Compile(reg, files, nil); err != nil {
				b.Fatal(err)
			}
		}
		// What the check keeps past the shard's own cache.
		b.ReportMetric(float64(retainedBy(b, func() any {
			c := &Cache{Groups: fleet.Selector{"g-0"}}
			if _, err := c.Compile(reg, shardFleetFiles(-1, 0), nil); err != nil {
				b.Fatal(err)
			}
			return c
		})), "shard-B")
		b.ReportMetric(float64(retainedBy(b, func() any {
			c := &Cache{Groups: fleet.Selector{"g-0"}}
			if _, err := c.Compile(reg, shardFleetFiles(-1, 0), nil); err != nil {
				b.Fatal(err)
			}
			if _, err := c.Whole().Compile(reg, shardFleetFiles(-1, 0), nil); err != nil {
				b.Fatal(err)
			}
			return c
		})), "shard+check-B")
	})
}

// retainedBy is the heap that what build returns keeps alive, after
// collection.
func retainedBy(tb testing.TB, build func() any) uint64 {
	tb.Helper()
	heap := func() uint64 {
		var ms runtime.MemStats
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	kept := build()
	after := heap()
	runtime.KeepAlive(kept)
	if after < before {
		return 0
	}
	return after - before
}
