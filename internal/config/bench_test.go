package config

import (
	"testing"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

func BenchmarkLoad(b *testing.B) {
	reg := xdstype.New()
	for _, c := range []struct {
		name   string
		asJSON bool
	}{{"yaml", false}, {"json", true}} {
		data := bigConfig(1<<20, c.asJSON)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Load(reg, []File{{Path: "big", Data: data}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
