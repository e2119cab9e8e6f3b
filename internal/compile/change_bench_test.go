package compile

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// edit is one object of a benchWorld changed to its kth value (k > 0; 0
// is the object as first written).
type edit struct {
	kind string // "route", "endpoints" or "listener"
	k    int
}

// benchWorld is a config of n services (EDS clusters of ten endpoints),
// one listener per hundred services, each with its own route table of a
// route to each of its hundred services, as one JSON file, as a
// generated config is written: the fixed cost of a change is measured on
// it. e changes one object: the first route's prefix, the first
// service's first endpoint's port, or the first listener's port.
func benchWorld(n int, e edit) config.File {
	var b strings.Builder
	b.WriteString(`{"services": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"name": "svc-%d", "endpoints": [`, i)
		for j := range 10 {
			port := 8080
			if e.kind == "endpoints" && i == 0 && j == 0 {
				port = 9000 + e.k
			}
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"address": "10.%d.%d.%d", "port": %d}`, i/256, i%256, j, port)
		}
		b.WriteString("]}")
	}
	tables := max(1, n/100)
	b.WriteString("],\n\"routes\": [")
	for t := range tables {
		if t > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"name": "r%d", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [`, t)
		for i := t; i < n; i += tables {
			if i != t {
				b.WriteString(", ")
			}
			prefix := fmt.Sprintf("/svc-%d/", i)
			if e.kind == "route" && i == 0 {
				prefix = fmt.Sprintf("/svc-%d-v%d/", i, e.k)
			}
			fmt.Fprintf(&b, `{"match": {"prefix": %q}, "to": [{"service": "svc-%d"}]}`, prefix, i)
		}
		b.WriteString("]}]}")
	}
	b.WriteString("],\n\"listeners\": [")
	for t := range tables {
		if t > 0 {
			b.WriteString(",\n")
		}
		port := 10000 + t
		if e.kind == "listener" && t == 0 {
			port = 30000 + e.k
		}
		fmt.Fprintf(&b, `{"name": "l%d", "port": %d, "routes": "r%d"}`, t, port, t)
	}
	b.WriteString("]}\n")
	return config.File{Path: "config.json", Data: []byte(b.String())}
}

// BenchmarkChangeFixedCost is a change to one object of a config of 100,
// 1,000 and 5,000 services, compiled as the pipeline compiles it (its
// Cache kept from the compile before): a route, one service's endpoints,
// a listener. The config is written anew for each change, as a source
// reads it; writing it is not timed.
func BenchmarkChangeFixedCost(b *testing.B) {
	reg := xdstype.New()
	for _, n := range []int{100, 1000, 5000} {
		for _, kind := range []string{"route", "endpoints", "listener"} {
			b.Run(fmt.Sprintf("clusters=%d/change=%s", n, kind), func(b *testing.B) {
				benchChanges(b, reg, func(k int) config.File { return benchWorld(n, edit{kind, k}) })
			})
		}
	}
}

// benchChanges compiles world(0), then world(1), world(2)... through one
// Cache, as the pipeline compiles a stream of changes, reporting each
// compile's CPU time (writing the config is not timed).
func benchChanges(b *testing.B, reg *xdstype.Registry, world func(k int) config.File) {
	var c Cache
	if _, err := c.Compile(reg, []config.File{world(0)}, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	k := 0
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		k++
		files := []config.File{world(k)}
		b.StartTimer()
		start := processCPU()
		if _, err := c.Compile(reg, files, nil); err != nil {
			b.Fatal(err)
		}
		cpu += processCPU() - start
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time the process has used (user and system, every
// thread: the collector's too): on a machine shared with other work a
// compile's CPU time is steadier than its wall time, which includes
// waiting for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkParseMemory is the peak heap of decoding a config file of
// about 1 MiB and 15 MiB (config.Load, as a first compile does), as a
// multiple of the file's size ("x-size"): the heap in use, sampled while
// the load runs, above what it was before.
func BenchmarkParseMemory(b *testing.B) {
	reg := xdstype.New()
	// About 520 bytes of JSON a service.
	for _, size := range []struct {
		name string
		n    int
	}{{"1MiB", 2000}, {"15MiB", 30000}} {
		b.Run("size="+size.name, func(b *testing.B) {
			f := benchWorld(size.n, edit{})
			b.SetBytes(int64(len(f.Data)))
			var worst float64
			for b.Loop() {
				peak := peakHeap(func() {
					if _, err := config.Load(reg, []config.File{f}); err != nil {
						b.Fatal(err)
					}
				})
				worst = max(worst, float64(peak)/float64(len(f.Data)))
			}
			b.ReportMetric(worst, "x-size")
			b.ReportMetric(float64(len(f.Data))/(1<<20), "MiB")
		})
	}
}

// peakHeap runs fn and returns the most heap it held above what was live
// before: the heap is sampled every 200µs (runtime/metrics would miss a
// peak between collections too; a collection forced first makes the base
// what is live), bounded by fn's own duration.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	// Collections as a process with GOGC=100 would run them: the test
	// binary's own settings aside.
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			var s runtime.MemStats
			runtime.ReadMemStats(&s)
			if s.HeapAlloc > peak.Load() {
				peak.Store(s.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	fn()
	close(stop)
	wg.Wait()
	runtime.ReadMemStats(&m)
	if m.HeapAlloc > peak.Load() {
		peak.Store(m.HeapAlloc)
	}
	if peak.Load() < base {
		return 0
	}
	return peak.Load() - base
}
