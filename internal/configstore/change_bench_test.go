package configstore

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store/bolt"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// benchObjects is a config document of n services (ten endpoints each),
// one listener per hundred services, each with its own route table of a
// route to each of its services, as `pylon apply` sends it.
func benchObjects(n int) string {
	var b strings.Builder
	b.WriteString(`{"services": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(benchService(i, 8080))
	}
	tables := max(1, n/100)
	b.WriteString("],\n\"routes\": [")
	for t := range tables {
		if t > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(benchRoutes(t, tables, n, ""))
	}
	b.WriteString("],\n\"listeners\": [")
	for t := range tables {
		if t > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(benchListener(t, 10000+t))
	}
	b.WriteString("]}\n")
	return b.String()
}

// benchService is service i with its first endpoint on port.
func benchService(i, port int) string {
	var eps []string
	for j := range 10 {
		p := 8080
		if j == 0 {
			p = port
		}
		eps = append(eps, fmt.Sprintf(`{"address": "10.%d.%d.%d", "port": %d}`, i/256, i%256, j, p))
	}
	return fmt.Sprintf(`{"name": "svc-%d", "endpoints": [%s]}`, i, strings.Join(eps, ", "))
}

// benchRoutes is route table t, its first route's prefix suffixed.
func benchRoutes(t, tables, n int, suffix string) string {
	var routes []string
	for i := t; i < n; i += tables {
		s := ""
		if i == t {
			s = suffix
		}
		routes = append(routes, fmt.Sprintf(`{"match": {"prefix": "/svc-%d%s/"}, "to": [{"service": "svc-%d"}]}`, i, s, i))
	}
	return fmt.Sprintf(`{"name": "r%d", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [%s]}]}`, t, strings.Join(routes, ", "))
}

func benchListener(t, port int) string {
	return fmt.Sprintf(`{"name": "l%d", "port": %d, "routes": "r%d"}`, t, port, t)
}

// processCPU is the CPU time the process has used (user and system, every
// thread: the collector's and bolt's too), steadier than wall time on a
// machine shared with other work.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAPIChangeFixedCost is a write of one object through the API's
// path to a stored config of 100, 1,000 and 5,000 services: the document
// decoded (ReadDocument), the would-be config validated and compiled
// whole, its version hashed, and the change stored on bolt with its
// history entry. The change is a route table, a service (its endpoints)
// or a listener.
func BenchmarkAPIChangeFixedCost(b *testing.B) {
	reg := xdstype.New()
	for _, n := range []int{100, 1000, 5000} {
		for _, kind := range []string{"route", "endpoints", "listener"} {
			b.Run(fmt.Sprintf("clusters=%d/change=%s", n, kind), func(b *testing.B) {
				st, err := bolt.Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				s := New(Options{Store: st, Registry: reg, Keep: 100})
				seed, err := Objects(reg, []byte(benchObjects(n)))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Commit(b.Context(), seed, "seed", false); err != nil {
					b.Fatal(err)
				}
				doc := func(k int) string {
					switch kind {
					case "route":
						return `{"routes": [` + benchRoutes(0, max(1, n/100), n, fmt.Sprintf("-v%d", k)) + `]}`
					case "endpoints":
						return `{"services": [` + benchService(0, 9000+k%20000) + `]}`
					default:
						return `{"listeners": [` + benchListener(0, 30000+k%20000) + `]}`
					}
				}
				b.ReportAllocs()
				k := 0
				start := processCPU()
				defer func() { b.ReportMetric(float64((processCPU()-start).Nanoseconds())/float64(b.N), "cpu-ns/op") }()
				for b.Loop() {
					k++
					changes, err := Objects(reg, []byte(doc(k)))
					if err != nil {
						b.Fatal(err)
					}
					if _, err := s.Commit(b.Context(), changes, "change", false); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
