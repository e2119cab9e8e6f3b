package compile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// churnFiles is the store's view of the churn benchmark's world: 1,000
// services of ten endpoints, one object (file) each, a route table naming
// them all and a listener; the service moved changes one endpoint's port.
func churnFiles(moved, port int) []config.File {
	var files []config.File
	var routes []string
	for i := range 1000 {
		var eps []string
		for j := range 10 {
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
		config.File{Path: "routes/r", Data: []byte(`{"routes": [{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [` + strings.Join(routes, ", ") + `]}]}]}`)},
		config.File{Path: "listeners/l", Data: []byte(`{"listeners": [{"name": "l", "port": 8080, "routes": "r"}]}`)},
	)
	return files
}

// BenchmarkCompileOneEndpointChange is a publish under endpoint churn:
// the whole config compiled again with one endpoint moved, without and
// with the pipeline's Cache.
func BenchmarkCompileOneEndpointChange(b *testing.B) {
	reg := xdstype.New()
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cached=%v", cached), func(b *testing.B) {
			var c Cache
			compileOnce := func(files []config.File) {
				var err error
				if cached {
					_, err = c.Compile(reg, files, nil)
				} else {
					_, err = Compile(reg, files, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			compileOnce(churnFiles(0, 8080))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				files := churnFiles(i%1000, 9000+i%1000)
				b.StartTimer()
				compileOnce(files)
			}
		})
	}
}
