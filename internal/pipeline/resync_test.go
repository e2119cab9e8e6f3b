package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// servicesConfig is a JSON config of n services of ten endpoints each.
func servicesConfig(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"services": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"name": "svc-%d", "endpoints": [`, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"address": "10.%d.%d.%d", "port": 8080}`, i/256, i%256, j)
		}
		b.WriteString("]}")
	}
	b.WriteString("]}\n")
	return []byte(b.String())
}

// A resync reads a config that has not changed: applying it again is
// neither compiled nor published (it hashes the files and the files the
// config named), so that a resync every 30 s of a large config allocates
// next to nothing and the heap it keeps stays as it was after N of them.
// Not a timed test: allocation and the live heap after collections.
func TestResyncOfAnUnchangedConfigCompilesNothing(t *testing.T) {
	var results []string
	p := New(Options{Registry: xdstype.New(), Publish: PublishTo(fleet.NewPublisher()),
		OnResult: func(r string, _ *fleet.Fleet) { results = append(results, r) }})
	data := servicesConfig(2000)
	if err := p.Apply(newUpdate("big.json", data)); err != nil {
		t.Fatal(err)
	}
	version := p.Status().Version
	const resyncs = 10
	reads := make([][]byte, resyncs) // each resync reads the file anew
	for i := range reads {
		reads[i] = bytes.Clone(data)
	}
	var first, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&first)
	for i := range resyncs {
		if err := p.Apply(newUpdate("big.json", reads[i])); err != nil {
			t.Fatal(err)
		}
		reads[i] = nil
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perResync := float64(after.TotalAlloc-first.TotalAlloc) / resyncs / float64(len(data))
	t.Logf("a resync of %d KiB allocated %.2f bytes per config byte; the live heap went from %d to %d KiB over %d resyncs",
		len(data)>>10, perResync, first.HeapAlloc>>10, after.HeapAlloc>>10, resyncs)
	if perResync > 0.5 {
		t.Errorf("a resync of an unchanged config allocated %.2f bytes per config byte, want at most 0.5 (it was compiled again)", perResync)
	}
	if after.HeapAlloc > first.HeapAlloc+uint64(len(data)) {
		t.Errorf("the live heap grew from %d to %d KiB over %d resyncs", first.HeapAlloc>>10, after.HeapAlloc>>10, resyncs)
	}
	if p.Status().Version != version || len(results) != resyncs+1 || results[resyncs] != "unchanged" {
		t.Errorf("after the resyncs: version %s (want %s), results %v", p.Status().Version, version, results)
	}
}

// A config whose files are unchanged is compiled again when a file it
// names (a certificate) changed, and after a refusal: only an update of
// the same files and the same named files as the last good one is not.
// OnFiles, told after each good compile, counts the compiles.
func TestUnchangedConfigCompiledWhenWhatItReadsChanged(t *testing.T) {
	ca := map[string][]byte{"ca.crt": golden(t, "certs/ca.crt")}
	compiles, refuse := 0, false
	pub := fleet.NewPublisher()
	p := New(Options{Registry: xdstype.New(),
		Publish: func(f *fleet.Fleet, _ []config.File) (bool, error) {
			if refuse {
				refuse = false
				return false, errors.New("group default: rollout halted")
			}
			return pub.Publish(f), nil
		},
		Read:    func(path string) ([]byte, error) { return ca[path], nil },
		OnFiles: func([]string) { compiles++ }})
	doc := []byte("secrets:\n- { name: ca, ca_file: ca.crt }\n")
	apply := func(step string, wantCompiles int) {
		t.Helper()
		_ = p.Apply(newUpdate("pylon.yaml", doc))
		if compiles != wantCompiles {
			t.Fatalf("%s: %d compiles, want %d", step, compiles, wantCompiles)
		}
	}
	apply("first", 1)
	apply("the same again", 1)
	ca["ca.crt"] = append(golden(t, "certs/ca.crt"), "\n"...)
	apply("the certificate changed", 2)
	apply("the same again", 2)
	ca["ca.crt"], refuse = golden(t, "certs/ca.crt"), true
	apply("a change refused by the publish stage", 3)
	if p.Status().Refused == nil {
		t.Fatal("the publish stage's refusal is not reported")
	}
	ca["ca.crt"] = append(golden(t, "certs/ca.crt"), "\n"...)
	apply("back to the last good config after a refusal", 4)
	if p.Status().Refused != nil {
		t.Fatalf("the refusal is still reported: %+v", p.Status().Refused)
	}
}
