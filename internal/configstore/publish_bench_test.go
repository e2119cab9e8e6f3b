package configstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// BenchmarkPublishHotService is one publish of the runner and the
// pipeline (rendering the stored objects, compiling them through the
// pipeline's cache) while registrations pour into one service that holds
// 20,000 registered endpoints: one endpoint more each publish.
func BenchmarkPublishHotService(b *testing.B) {
	reg := xdstype.New()
	now := time.Unix(1_000_000, 0)
	objs := []store.Object{{Key: store.Key{Kind: "services", Name: "svc"}, Body: []byte(`{"name": "svc", "endpoints": [{"address": "127.0.0.1", "port": 9000}]}`)}}
	add := func(i int) {
		objs = append(objs, store.Object{Key: store.Key{Kind: "endpoints.svc", Name: fmt.Sprint(i)},
			Body: fmt.Appendf(nil, `{"address":"10.%d.%d.%d","port":%d}`, i/62500, i/250%250, i%250, 1+i%60000), Expires: now.Add(time.Hour)})
	}
	for i := range 20000 {
		add(i)
	}
	var r rendered
	var c compile.Cache
	publish := func() {
		files, err := r.files(append([]store.Object(nil), objs...), now)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Compile(reg, files, nil); err != nil {
			b.Fatal(err)
		}
	}
	publish()
	b.ReportAllocs()
	i := 20000
	for b.Loop() {
		add(i)
		i++
		publish()
	}
}
