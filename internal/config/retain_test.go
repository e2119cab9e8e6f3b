package config

import (
	"runtime"
	"testing"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// heapInUse is the heap live after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// What a load returns keeps no piece of the file's text, which would keep
// the whole text alive (a copy of the file, the size of the file): a
// resource's name, read from the text on the JSON path, is its own
// string. Not a timed test: the heap is measured after collections.
func TestLoadedNamesKeepNoCopyOfTheFile(t *testing.T) {
	reg := xdstype.New()
	data := bigConfig(8<<20, true)
	base := heapInUse()
	doc, err := Load(reg, []File{{Path: "big.json", Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(doc.Resources))
	for i, r := range doc.Resources {
		names[i] = r.Name
	}
	doc = nil
	kept := float64(heapInUse()-base) / float64(len(data))
	runtime.KeepAlive(names)
	runtime.KeepAlive(data)
	t.Logf("%d names keep %.2f bytes per input byte", len(names), kept)
	if kept > 0.5 {
		t.Errorf("the resources' names keep %.2f bytes per input byte alive, want at most 0.5 (a copy of the file is 1)", kept)
	}
}
