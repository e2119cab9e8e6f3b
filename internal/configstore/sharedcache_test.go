package configstore

import (
	"fmt"
	"sync"
	"testing"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/store"
)

// A write validated through a compile cache the pipeline compiles through
// at the same time (Options.Cache, as the daemon wires them) is judged as
// one through a cache of its own: the same version for a good write, the
// same refusal for a bad one.
func TestWritesThroughASharedCacheAsThroughTheirOwn(t *testing.T) {
	var shared compile.Cache
	own := newServiceWith(t, Options{})
	sharing := newServiceWith(t, Options{Cache: &shared})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the pipeline: compiling the stored config over and over
		for {
			select {
			case <-stop:
				return
			default:
			}
			files, err := sharing.Current(t.Context())
			if err == nil {
				_, _ = shared.Compile(own.opts.Registry, files, nil)
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for i := range 40 {
		changes := []store.Change{{Key: store.Key{Kind: "services", Name: fmt.Sprintf("svc-%d", i%5)}, Body: service(fmt.Sprintf("svc-%d", i%5), 8000+i)}}
		if i%7 == 6 {
			// A route to a service that is not there: refused.
			changes = append(changes, store.Change{Key: store.Key{Kind: "routes", Name: "r"}, Body: []byte(`{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "to": [{"service": "gone"}]}]}]}`)})
		}
		a, errA := own.Commit(t.Context(), changes, "change", false)
		b, errB := sharing.Commit(t.Context(), changes, "change", false)
		if (errA == nil) != (errB == nil) || (errA != nil && errA.Error() != errB.Error()) {
			t.Fatalf("write %d: %v through its own cache, %v through the shared one", i, errA, errB)
		}
		if a.Version != b.Version {
			t.Fatalf("write %d: version %s through its own cache, %s through the shared one", i, a.Version, b.Version)
		}
	}
}
