package config

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// allocatedBy returns the bytes f allocates on the heap.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Decoding allocates in proportion to the input, with a bound per input
// byte: a 50 MB file once cost 3.3 GB. Not a timed test: the counts are the
// same on a slow machine. Before the streaming decode, these configs cost
// 46 (YAML) and 42 (JSON) bytes per input byte.
func TestLoadAllocationsPerInputByte(t *testing.T) {
	reg := xdstype.New()
	for _, c := range []struct {
		name    string
		asJSON  bool
		perByte float64
	}{
		{"yaml", false, 36}, // the YAML tree of the whole document dominates
		{"json", true, 20},  // streamed: the messages dominate
	} {
		data := bigConfig(4<<20, c.asJSON)
		var doc *Document
		var err error
		got := float64(allocatedBy(func() { doc, err = Load(reg, []File{{Path: "big." + c.name, Data: data}}) })) / float64(len(data))
		if err != nil {
			t.Fatal(err)
		}
		if len(doc.Resources) < 10000 {
			t.Fatalf("%s: %d resources decoded", c.name, len(doc.Resources))
		}
		t.Logf("%s: %.1f bytes allocated per input byte", c.name, got)
		if got > c.perByte {
			t.Errorf("%s: decoding allocated %.1f bytes per input byte, want at most %.0f", c.name, got, c.perByte)
		}
	}
}

// TestMeasureLoad prints time, allocation and peak heap for a file at the
// limit (PYLON_MEASURE=1; the figures in docs/config.md come from it).
func TestMeasureLoad(t *testing.T) {
	if os.Getenv("PYLON_MEASURE") == "" {
		t.Skip("set PYLON_MEASURE=1")
	}
	reg := xdstype.New()
	for _, asJSON := range []bool{false, true} {
		data := bigConfig(MaxFileBytes, asJSON)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		var peak atomic.Uint64
		done := make(chan struct{})
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			var m runtime.MemStats
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > peak.Load() {
					peak.Store(m.HeapAlloc)
				}
			}
		}()
		start := time.Now()
		doc, err := Load(reg, []File{{Path: "big", Data: data}})
		el := time.Since(start)
		close(done)
		<-stopped
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("json=%v input %d MiB, %d resources: %v, allocated %d MiB (%.1f per input byte), peak heap %d MiB over %d MiB before",
			asJSON, len(data)>>20, len(doc.Resources), el, (after.TotalAlloc-before.TotalAlloc)>>20,
			float64(after.TotalAlloc-before.TotalAlloc)/float64(len(data)), peak.Load()>>20, before.HeapAlloc>>20)
	}
}

// The files of one configuration are bounded together too, before any is
// parsed.
func TestLoadRefusesTotalOverLimit(t *testing.T) {
	chunk := make([]byte, MaxFileBytes)
	files := make([]File, MaxTotalBytes/MaxFileBytes+1)
	for i := range files {
		files[i] = File{Path: "f" + string(rune('a'+i)), Data: chunk}
	}
	_, err := Load(xdstype.New(), files)
	if err == nil || !strings.Contains(err.Error(), "over the 64 MiB limit") {
		t.Fatalf("Load of %d MiB: %v", len(files)*MaxFileBytes>>20, err)
	}
}

// Files a source bounds itself (the Kubernetes source's) are not counted
// in the own files' total: the own files keep their whole room.
func TestLoadLeavesSourceBoundedFilesOutOfTheTotal(t *testing.T) {
	padded := func(path string, n int) File {
		data := append([]byte(`{"resources": []`), bytes.Repeat([]byte(" "), n-len(`{"resources": []}`))...)
		return File{Path: path, Data: append(data, '}')}
	}
	files := make([]File, MaxTotalBytes/MaxFileBytes)
	for i := range files {
		files[i] = padded("own"+string(rune('a'+i)), MaxFileBytes)
	}
	bounded := padded("kubernetes/cluster/services.json", 1<<20)
	bounded.SourceBounded = true
	if _, err := Load(xdstype.New(), append(files, bounded)); err != nil {
		t.Fatalf("the own files at the limit and a source-bounded file: %v", err)
	}
	bounded.SourceBounded = false
	_, err := Load(xdstype.New(), append(files, bounded))
	if err == nil || !strings.Contains(err.Error(), "over the 64 MiB limit") {
		t.Fatalf("the same file not source-bounded: %v, want refused over the limit", err)
	}
}
