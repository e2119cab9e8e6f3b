package compile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// preferCloseWorld is n services of ten endpoints over three zones, each
// of traffic_distribution PreferClose when prefer is set, a route table
// and listener to them, and a group pinned to each zone: what a cluster's
// PreferClose Services and one node group per zone make. k moves the
// first service's first endpoint (a change).
func preferCloseWorld(n int, prefer bool, k int) config.File {
	var b strings.Builder
	b.WriteString(`{"groups": [`)
	for z, zone := range []string{"a", "b", "c"} {
		if z > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"name": "zone-%s", "match": {"zone": %q}}`, zone, zone)
	}
	b.WriteString(`, {"name": "rest", "default": true}],` + "\n" + `"services": [`)
	td := ""
	if prefer {
		td = `"traffic_distribution": "PreferClose", `
	}
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"name": "svc-%d", %s"endpoints": [`, i, td)
		for j := range 10 {
			port := 8080
			if i == 0 && j == 0 {
				port = 9000 + k
			}
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"address": "10.%d.%d.%d", "port": %d, "zone": %q}`, i/256, i%256, j, port, string(rune('a'+j%3)))
		}
		b.WriteString("]}")
	}
	b.WriteString("],\n" + `"routes": [{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"match": {"prefix": "/svc-%d/"}, "to": [{"service": "svc-%d"}]}`, i, i)
	}
	b.WriteString(`]}]}],` + "\n" + `"listeners": [{"name": "l", "port": 10000, "routes": "r"}]}` + "\n")
	return config.File{Path: "config.json", Data: []byte(b.String())}
}

// BenchmarkPreferCloseChange is one endpoint's change to 1,000 services
// served to three zone-pinned groups, compiled as the pipeline compiles
// it, with and without PreferClose: what the close-first assignments add
// to a change.
func BenchmarkPreferCloseChange(b *testing.B) {
	reg := xdstype.New()
	for _, prefer := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefer_close=%v", prefer), func(b *testing.B) {
			benchChanges(b, reg, func(k int) config.File { return preferCloseWorld(1000, prefer, k) })
		})
	}
}

// BenchmarkPreferCloseTwoGroupsOfAZone is the same change with two groups
// pinning one zone, scoped to other services: each group's close-first
// builds keep their own encodings (one shared Validated made each undo
// the other's every compile).
func BenchmarkPreferCloseTwoGroupsOfAZone(b *testing.B) {
	reg := xdstype.New()
	groups := `{"name": "zone-a", "match": {"zone": "a"}}, {"name": "zone-b", "match": {"zone": "b"}}`
	sameZone := `{"name": "a-1", "match": {"zone": "a", "cluster": "one"}, "scope": {"clusters": ["svc-1*"]}}, {"name": "a-2", "match": {"zone": "a", "cluster": "two"}, "scope": {"clusters": ["svc-2*"]}}`
	b.Run("two_zones", func(b *testing.B) {
		benchChanges(b, reg, func(k int) config.File {
			return preferCloseWorld(1000, true, k)
		})
	})
	b.Run("one_zone", func(b *testing.B) {
		benchChanges(b, reg, func(k int) config.File {
			f := preferCloseWorld(1000, true, k)
			f.Data = []byte(strings.Replace(string(f.Data), groups, sameZone, 1))
			return f
		})
	})
}
